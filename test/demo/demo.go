package demo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/bootstrap"
	istiocrds "github.com/flotilla-gitops/flotilla/test/fixtures/istio-crds"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// Clusters are the template's clusters, each started locally.
var Clusters = []string{"member1", "member2", "edge-1"}

// repoName is the fleet repo on the local Git server.
const repoName = "fleet"

// agentNamespace is where each agent keeps its inventories and Lease, as
// in the DaemonSet install.
const agentNamespace = "flotilla-system"

// Options configure Start.
type Options struct {
	// Dir is the working directory (Git server, clusters, agents' caches and
	// logs, the fleet repo clone); "" creates a temporary one that Stop
	// removes.
	Dir string
	// BinDir holds flotilla, flotilla-agent and the tools; "" is the
	// module's bin/ (testenv.BinDir).
	BinDir string
	// Out receives the progress lines; nil discards them.
	Out io.Writer
	// Interval is the agents' reconcile interval; 0 means 30s.
	Interval time.Duration
	// DashboardListen is where `flotilla dashboard` serves the fleet's
	// page; "" picks a free port on 127.0.0.1.
	DashboardListen string
}

// Fleet is a running demo fleet.
type Fleet struct {
	// RepoURL is the fleet repo's URL (without credentials).
	RepoURL string
	// CloneDir is a clone of the fleet repo with push rights, for the user.
	CloneDir string
	// CredentialsDir holds the maintainer's Git credentials, in the layout
	// of --git-credentials-dir.
	CredentialsDir string
	// Dir is the working directory.
	Dir string
	// DashboardURL is the fleet's page, served by `flotilla dashboard`.
	DashboardURL string

	opts     Options
	ownsDir  bool
	bin      string
	git      *gitserver.Server
	clusters []*testenv.Cluster
	agents   []*agentProcess
	// dashboard is the `flotilla dashboard` process.
	dashboard *agentProcess
	stopOnce  sync.Once
	stopErr   error
}

type agentProcess struct {
	cluster string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

// Start brings the whole fleet up: Git server, fleet repo, clusters and
// agents. It returns once every agent runs; WaitInSync waits for them to
// converge. On error, everything already started is stopped.
func Start(ctx context.Context, opts Options) (_ *Fleet, err error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Interval == 0 {
		opts.Interval = 30 * time.Second
	}
	f := &Fleet{opts: opts, Dir: opts.Dir}
	defer func() {
		if err != nil {
			_ = f.Stop()
		}
	}()
	if f.bin = opts.BinDir; f.bin == "" {
		if f.bin, err = testenv.BinDir(); err != nil {
			return nil, err
		}
	}
	for _, b := range []string{"flotilla", "flotilla-agent"} {
		if _, err := os.Stat(filepath.Join(f.bin, b)); err != nil {
			return nil, fmt.Errorf("%s is not built (run make build): %w", b, err)
		}
	}
	if f.Dir == "" {
		if f.Dir, err = os.MkdirTemp("", "flotilla-demo-"); err != nil {
			return nil, err
		}
		f.ownsDir = true
	} else if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return nil, err
	}

	began := time.Now()
	f.logf("starting a Git server and clusters %s (etcd, kube-apiserver, controllers, kwok nodes, Volcano)", strings.Join(Clusters, ", "))
	clustersDone := make(chan error, 1)
	go func() { clustersDone <- f.startClusters(ctx) }()
	if err := f.startGit(ctx); err != nil {
		<-clustersDone
		return nil, err
	}
	if err := <-clustersDone; err != nil {
		return nil, err
	}
	f.logf("clusters ready in %s", time.Since(began).Round(time.Second))
	for i, name := range Clusters {
		if err := f.startAgent(ctx, name, f.clusters[i]); err != nil {
			return nil, err
		}
	}
	f.logf("agents started; logs in %s", filepath.Join(f.Dir, "agents"))
	if err := f.startDashboard(ctx); err != nil {
		return nil, err
	}
	f.logf("dashboard: %s", f.DashboardURL)
	return f, nil
}

// startDashboard runs `flotilla dashboard` on the fleet repo, as a user
// would, and reads the URL it prints.
func (f *Fleet) startDashboard(ctx context.Context) error {
	listen := f.opts.DashboardListen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	logPath := filepath.Join(f.Dir, "dashboard.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	args := append(f.sourceArgs("dashboard", "dashboard-cache"), "--listen", listen, "--refresh", "5s")
	cmd := exec.Command(f.Flotilla(), args...)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("dashboard: %w", err)
	}
	d := &agentProcess{cluster: "dashboard", cmd: cmd, logPath: logPath, done: make(chan struct{})}
	f.dashboard = d
	urls := make(chan string, 1)
	go func() {
		// The first line names the address; the rest goes to the log.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			if _, rest, ok := strings.Cut(line, "dashboard: "); ok {
				if url, _, ok := strings.Cut(rest, " "); ok {
					select {
					case urls <- url:
					default:
					}
				}
			}
		}
		_ = cmd.Wait()
		logFile.Close()
		close(d.done)
	}()
	select {
	case f.DashboardURL = <-urls:
		return nil
	case <-d.done:
		return fmt.Errorf("dashboard exited: %s", tailFile(logPath, 20))
	case <-ctx.Done():
		return fmt.Errorf("dashboard: %w", ctx.Err())
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("dashboard printed no address in 2m: %s", tailFile(logPath, 20))
	}
}

// startGit starts the server, creates the fleet repo with `flotilla init`
// and `flotilla render`, and pushes it as the maintainer would.
func (f *Fleet) startGit(ctx context.Context) error {
	var err error
	f.git, err = gitserver.New(context.Background(), filepath.Join(f.Dir, "git"), gitserver.ForgeConfig(Clusters...))
	if err != nil {
		return fmt.Errorf("git server: %w", err)
	}
	if _, err := f.git.CreateRepo(repoName, ""); err != nil {
		return err
	}
	f.RepoURL = f.git.URL(repoName)
	f.CredentialsDir = filepath.Join(f.Dir, "credentials", gitserver.Maintainer)
	if err := writeCredentials(f.CredentialsDir, gitserver.Maintainer, f.git.Password(gitserver.Maintainer)); err != nil {
		return err
	}

	f.CloneDir = filepath.Join(f.Dir, "fleet")
	if _, err := f.Run(ctx, "", f.Flotilla(), "init", f.CloneDir, "--git"); err != nil {
		return err
	}
	if _, err := f.Run(ctx, "", f.Flotilla(), "render", "--repo", f.CloneDir); err != nil {
		return err
	}
	// A fresh render of the template changes nothing; commit if it did, so
	// that the agents get what render produced.
	if out, err := f.Run(ctx, f.CloneDir, "git", "status", "--porcelain"); err != nil {
		return err
	} else if strings.TrimSpace(out) != "" {
		if _, err := f.Run(ctx, f.CloneDir, "git", "add", "-A"); err != nil {
			return err
		}
		if _, err := f.Run(ctx, f.CloneDir, "git", "commit", "-q", "-m", "Render the fleet"); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"remote", "add", "origin", f.git.UserURL(repoName, gitserver.Maintainer)},
		{"push", "-q", "-u", "origin", "main"},
	} {
		if _, err := f.Run(ctx, f.CloneDir, "git", args...); err != nil {
			return err
		}
	}
	f.logf("fleet repo %s pushed (clone in %s)", f.RepoURL, f.CloneDir)
	return nil
}

// startClusters starts every cluster at once: each is a handful of
// processes, and they spend most of their start-up waiting.
func (f *Fleet) startClusters(ctx context.Context) error {
	crds := filepath.Join(f.Dir, "istio-crds.yaml")
	if err := os.WriteFile(crds, istiocrds.YAML, 0o644); err != nil {
		return err
	}
	f.clusters = make([]*testenv.Cluster, len(Clusters))
	errs := make([]error, len(Clusters))
	var wg sync.WaitGroup
	for i, name := range Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 2*testenv.StartTimeout)
			defer cancel()
			c, err := testenv.New(cctx, name, filepath.Join(f.Dir, "clusters", name), testenv.ClusterOptions{
				Mode:    testenv.Full,
				Volcano: true,
				Nodes: append(testenv.Nodes(name+"-node", 2, testenv.NodeSpec{CPU: "32", Memory: "128Gi", Pods: 200}),
					testenv.GPUNodes(name+"-gpu", 1, 4)...),
			})
			if err != nil {
				errs[i] = fmt.Errorf("cluster %s: %w", name, err)
				return
			}
			f.clusters[i] = c
			// The template routes canary traffic with Istio; its CRDs stand
			// in for a mesh (no Istio control plane runs here).
			if err := c.ApplyCRDFiles(cctx, crds); err != nil {
				errs[i] = fmt.Errorf("cluster %s: istio CRDs: %w", name, err)
				return
			}
			if err := c.CreateNamespace(cctx, agentNamespace); err != nil {
				errs[i] = fmt.Errorf("cluster %s: %w", name, err)
				return
			}
			f.logf("cluster %s ready (%s)", name, c.StartDuration().Round(100*time.Millisecond))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startAgent runs flotilla-agent for cluster with the flags of the
// DaemonSet (manifests/base), pointed at the local cluster and Git server.
func (f *Fleet) startAgent(ctx context.Context, name string, c *testenv.Cluster) error {
	dir := filepath.Join(f.Dir, "agents", name)
	creds := filepath.Join(dir, "git-credentials")
	user := gitserver.AgentUser(name)
	if err := writeCredentials(creds, user, f.git.Password(user)); err != nil {
		return err
	}
	// The DaemonSet's arguments and settings (what `flotilla bootstrap`
	// installs), with the pod's paths replaced by local ones.
	install := bootstrap.InstallOptions{Cluster: name, RepoURL: f.RepoURL, Interval: f.opts.Interval, Namespace: agentNamespace}
	args, err := install.LocalAgentArgs(bootstrap.LocalAgent{
		Kubeconfig:     c.AdminKubeconfig(),
		CacheDir:       filepath.Join(dir, "cache"),
		CredentialsDir: creds,
		MetricsAddr:    "127.0.0.1:0",
		HealthAddr:     "127.0.0.1:0",
		Identity:       name + "-agent-0",
	})
	if err != nil {
		return err
	}
	// A demo wants merges noticed within seconds, not a minute.
	args = append(args, "--poll-interval=5s", "--heartbeat-interval=1m")
	a := &agentProcess{cluster: name, logPath: filepath.Join(dir, "agent.log"), done: make(chan struct{})}
	logFile, err := os.Create(a.logPath)
	if err != nil {
		return err
	}
	a.cmd = exec.Command(filepath.Join(f.bin, "flotilla-agent"), args...)
	a.cmd.Stdout, a.cmd.Stderr = logFile, logFile
	// An agent never outlives the demo, even when the demo is killed.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := a.cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("agent %s: %w", name, err)
	}
	go func() {
		_ = a.cmd.Wait()
		logFile.Close()
		close(a.done)
	}()
	f.agents = append(f.agents, a)
	return nil
}

// CollectorRollout is the rollout the "try this" steps give iot-collector:
// member1 first, the other clusters once it has been Ready for 10s.
const CollectorRollout = `  rollout:
    bake: 10s
    waves:
      - name: canary
        clusters: [member1]
`

// AddRollout appends CollectorRollout to apps/iot-collector/app.yaml in
// the clone at dir.
func AddRollout(dir string) error {
	return editFile(filepath.Join(dir, "apps", "iot-collector", "app.yaml"), func(s string) (string, error) {
		if !strings.Contains(s, "\nspec:\n") {
			return "", errors.New("no spec")
		}
		return strings.TrimRight(s, "\n") + "\n" + CollectorRollout, nil
	})
}

// EditCollectorCPU sets iot-collector's CPU request in the clone at dir.
func EditCollectorCPU(dir, cpu string) error {
	return editFile(filepath.Join(dir, "apps", "iot-collector", "manifests", "deployment.yaml"), func(s string) (string, error) {
		const old = "cpu: 10m"
		if !strings.Contains(s, old) {
			return "", fmt.Errorf("no %q to edit", old)
		}
		return strings.Replace(s, old, "cpu: "+cpu, 1), nil
	})
}

func editFile(path string, edit func(string) (string, error)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s, err := edit(string(b))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// Flotilla is the path of the flotilla binary used.
func (f *Fleet) Flotilla() string { return filepath.Join(f.bin, "flotilla") }

// PIDs are the agents' and clusters' component processes, for checking
// that Stop leaves none behind.
func (f *Fleet) PIDs() []int {
	var pids []int
	for _, a := range f.agents {
		if a.cmd.Process != nil {
			pids = append(pids, a.cmd.Process.Pid)
		}
	}
	if f.dashboard != nil && f.dashboard.cmd.Process != nil {
		pids = append(pids, f.dashboard.cmd.Process.Pid)
	}
	for _, c := range f.clusters {
		if c != nil {
			pids = append(pids, c.PIDs()...)
		}
	}
	sort.Ints(pids)
	return pids
}

// Stop ends the agents (SIGTERM, then SIGKILL after 15s), the clusters and
// the Git server, and removes the working directory when Start created it.
// It is safe to call more than once.
func (f *Fleet) Stop() error {
	f.stopOnce.Do(func() {
		var errs []error
		procs := f.agents
		if f.dashboard != nil {
			procs = append(slices.Clone(procs), f.dashboard)
		}
		for _, a := range procs {
			_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGTERM)
		}
		for _, a := range procs {
			select {
			case <-a.done:
			case <-time.After(15 * time.Second):
				_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
				<-a.done
			}
		}
		for _, c := range f.clusters {
			if c != nil {
				if err := c.Stop(); err != nil {
					errs = append(errs, fmt.Errorf("cluster %s: %w", c.Name, err))
				}
			}
		}
		if f.git != nil {
			f.git.Close()
		}
		if f.ownsDir && f.Dir != "" {
			if err := os.RemoveAll(f.Dir); err != nil {
				errs = append(errs, err)
			}
		}
		f.stopErr = errors.Join(errs...)
	})
	return f.stopErr
}

// Cluster is the running cluster of that name, or nil.
func (f *Fleet) Cluster(name string) *testenv.Cluster {
	for _, c := range f.clusters {
		if c != nil && c.Name == name {
			return c
		}
	}
	return nil
}

// Run runs a command as the user of the demo would (with a Git identity
// set) and returns its stdout; on failure the error holds its stderr.
func (f *Fleet) Run(ctx context.Context, dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// The demo must work on a machine without a Git identity.
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=Flotilla Demo", "GIT_AUTHOR_EMAIL=demo@flotilla.invalid",
		"GIT_COMMITTER_NAME=Flotilla Demo", "GIT_COMMITTER_EMAIL=demo@flotilla.invalid",
		"GIT_TERMINAL_PROMPT=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(redactArgs(args), " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (f *Fleet) logf(format string, args ...any) {
	fmt.Fprintf(f.opts.Out, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// writeCredentials writes a Flux-shaped basic-auth Secret as files.
func writeCredentials(dir, user, password string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "username"), []byte(user), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "password"), []byte(password), 0o600)
}

// redactArgs hides the password of a URL with credentials.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if at := strings.Index(a, "@"); at > 0 && strings.HasPrefix(a, "http://") && strings.Contains(a[:at], ":") {
			userEnd := strings.LastIndex(a[:at], ":")
			a = a[:userEnd] + ":***" + a[at:]
		}
		out[i] = a
	}
	return out
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
