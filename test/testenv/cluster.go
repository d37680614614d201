package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Mode selects which components a cluster runs.
type Mode int

const (
	// Minimal runs etcd and kube-apiserver only: enough for apply, RBAC and
	// status tests, ready in a few seconds. Nothing reconciles Deployments or
	// schedules pods, and no ServiceAccounts are created for new namespaces.
	Minimal Mode = iota
	// Full adds kube-controller-manager, kube-scheduler, kwok with fake nodes
	// and, with ClusterOptions.Volcano, the Volcano scheduler and controllers.
	Full
)

func (m Mode) String() string {
	if m == Full {
		return "full"
	}
	return "minimal"
}

// Identities known to every cluster's static token file.
const (
	// AdminUser is in group system:masters.
	AdminUser = "flotilla-admin"
	// RestrictedUser has no RBAC bindings: tests grant what they need.
	RestrictedUser = "flotilla-restricted"
)

// Component names, used for log files and in errors.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kwok                  = "kwok"
	VolcanoControllers    = "vc-controller-manager"
	VolcanoScheduler      = "vc-scheduler"
)

// ErrNotFullMode reports an operation that needs a Full cluster.
var ErrNotFullMode = errors.New("cluster is not in full mode")

// User is an extra static-token identity for ClusterOptions.Users.
type User struct {
	Name   string
	Groups []string
}

// ClusterOptions configures New and StartCluster.
type ClusterOptions struct {
	Mode Mode
	// Nodes are the fake nodes of a Full cluster; nil means DefaultNodes().
	Nodes []NodeSpec
	// Volcano starts vc-controller-manager and vc-scheduler (Full mode only).
	Volcano bool
	// ExtraAPIServerFlags are appended last, so they override the defaults.
	ExtraAPIServerFlags []string
	// Users get a token each (see Cluster.Token) in addition to AdminUser and
	// RestrictedUser; the apiserver cannot learn new static tokens later.
	Users []User
	// Logf receives progress lines (phase timings, retries); nil discards them.
	Logf func(format string, args ...any)
}

// Timing is how long one start-up phase took.
type Timing struct {
	Phase    string
	Duration time.Duration
}

// Cluster is one running set of components on loopback.
type Cluster struct {
	Name string
	// Dir holds PKI, kubeconfigs, logs/ and etcd data.
	Dir string

	opts    ClusterOptions
	tools   map[string]string
	ownsDir bool

	pki        *pki
	ports      ports
	tokens     map[string]string
	host       string
	restConfig *rest.Config
	client     client.Client

	mu      sync.Mutex
	procs   []*process
	timings []Timing

	startDuration time.Duration
	stopOnce      sync.Once
	stopErr       error
}

// startAttempts bounds retries when a component dies during start-up, which
// in practice means another process grabbed one of our free ports.
const startAttempts = 3

// New starts a cluster and returns once every component is ready. dir is the
// working directory for PKI, kubeconfigs, logs and etcd data; "" creates a
// temporary directory that Stop removes, while a caller's dir is kept (minus
// etcd data) so its logs remain inspectable. Clusters are independent, and
// New may be called concurrently.
func New(ctx context.Context, name, dir string, opts ClusterOptions) (*Cluster, error) {
	began := time.Now()
	tools, err := requiredTools(opts)
	if err != nil {
		return nil, err
	}
	ownsDir := dir == ""
	if ownsDir {
		dir, err = os.MkdirTemp("", "flotilla-testenv-"+safeName(name)+"-")
	} else {
		err = os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %s dir: %w", name, err)
	}
	if opts.Mode == Full && opts.Nodes == nil {
		opts.Nodes = DefaultNodes()
	}
	c := &Cluster{Name: name, Dir: dir, opts: opts, tools: tools, ownsDir: ownsDir}
	for attempt := 1; ; attempt++ {
		err = c.start(ctx)
		if err == nil {
			break
		}
		retry := errors.Is(err, ErrComponentExited) && attempt < startAttempts && ctx.Err() == nil
		if !retry && !errors.Is(err, ErrComponentExited) {
			// A timeout does not say which component is stuck: show them all.
			err = fmt.Errorf("%w\n%s", err, c.LogTails(30))
		}
		c.stopProcesses()
		if !retry {
			_ = c.removeData()
			return nil, fmt.Errorf("start cluster %s: %w", name, err)
		}
		c.logf("cluster %s: start attempt %d failed, retrying with new ports: %v", name, attempt, err)
		if err := os.RemoveAll(c.etcdDataDir()); err != nil {
			return nil, fmt.Errorf("start cluster %s: reset etcd data: %w", name, err)
		}
		c.mu.Lock()
		c.procs, c.timings = nil, nil
		c.mu.Unlock()
	}
	c.startDuration = time.Since(began)
	c.logf("cluster %s (%s) ready in %s (%s)", name, opts.Mode, c.startDuration.Round(time.Millisecond), c.timingSummary())
	return c, nil
}

func requiredTools(opts ClusterOptions) (map[string]string, error) {
	names := []string{Etcd, KubeAPIServer}
	if opts.Mode == Full {
		names = append(names, KubeControllerManager, KubeScheduler, Kwok, "kwok-stages")
		if opts.Volcano {
			names = append(names, VolcanoControllers, VolcanoScheduler, "volcano/crds", "volcano/scheduler.conf")
		}
	}
	return toolPaths(names...)
}

type ports struct {
	etcdClient, etcdPeer, apiserver, kcm, scheduler, vcControllers, vcScheduler, vcMetrics int
}

func (c *Cluster) start(ctx context.Context) error {
	p, err := freePorts(8)
	if err != nil {
		return err
	}
	pt := ports{p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]}
	c.ports = pt
	if err := os.MkdirAll(filepath.Join(c.Dir, "logs"), 0o700); err != nil {
		return fmt.Errorf("logs dir: %w", err)
	}
	t0 := time.Now()
	if c.pki, err = generatePKI(filepath.Join(c.Dir, "pki")); err != nil {
		return err
	}
	if err := c.writeIdentities(pt); err != nil {
		return err
	}
	c.mark("pki+kubeconfigs", t0)

	t0 = time.Now()
	etcd, err := c.startEtcd(pt)
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(pt.etcdClient) + "/health"
	if err := poll(ctx, "etcd /health", httpProbe(etcdURL, nil, ""), etcd); err != nil {
		return err
	}
	c.mark(Etcd, t0)

	t0 = time.Now()
	apiserver, err := c.startAPIServer(pt)
	if err != nil {
		return err
	}
	if err := poll(ctx, "kube-apiserver /readyz", httpProbe(c.host+"/readyz", c.pki.caPEM, c.tokens[AdminUser]), apiserver, etcd); err != nil {
		return err
	}
	c.mark(KubeAPIServer, t0)
	if c.opts.Mode != Full {
		return nil
	}
	return c.startFull(ctx, pt, etcd, apiserver)
}

// startFull brings up the controllers in parallel: each waits only on what it
// really needs, so the slowest chain (CRDs → Volcano → default queue) sets
// the start-up time.
func (c *Cluster) startFull(ctx context.Context, pt ports, core ...*process) error {
	g, gctx := errgroup.WithContext(ctx)
	watchCore := func(extra ...*process) []*process { return append(append([]*process{}, core...), extra...) }

	g.Go(func() error {
		t0 := time.Now()
		kcm, err := c.startKCM(pt)
		if err != nil {
			return err
		}
		url := "https://127.0.0.1:" + strconv.Itoa(pt.kcm) + "/healthz"
		if err := poll(gctx, "kube-controller-manager /healthz", httpProbe(url, nil, ""), watchCore(kcm)...); err != nil {
			return err
		}
		// Pods need their namespace's "default" ServiceAccount (ServiceAccount
		// admission), which the controller manager creates.
		if err := c.waitDefaultServiceAccount(gctx, metav1.NamespaceDefault, watchCore(kcm)...); err != nil {
			return err
		}
		c.mark(KubeControllerManager, t0)
		return nil
	})
	g.Go(func() error {
		t0 := time.Now()
		sched, err := c.startScheduler(pt)
		if err != nil {
			return err
		}
		url := "https://127.0.0.1:" + strconv.Itoa(pt.scheduler) + "/healthz"
		if err := poll(gctx, "kube-scheduler /healthz", httpProbe(url, nil, ""), watchCore(sched)...); err != nil {
			return err
		}
		c.mark(KubeScheduler, t0)
		return nil
	})
	g.Go(func() error {
		t0 := time.Now()
		if _, err := c.startKwok(); err != nil {
			return err
		}
		if err := c.AddNodes(gctx, c.opts.Nodes...); err != nil {
			return err
		}
		c.mark("kwok+nodes", t0)
		return nil
	})
	if c.opts.Volcano {
		g.Go(func() error { return c.startVolcano(gctx, pt, watchCore) })
	}
	return g.Wait()
}

func (c *Cluster) waitDefaultServiceAccount(ctx context.Context, namespace string, watched ...*process) error {
	return poll(ctx, "ServiceAccount "+namespace+"/default", func(ctx context.Context) (bool, error) {
		var sa corev1.ServiceAccount
		err := c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "default"}, &sa)
		return err == nil, nil
	}, watched...)
}

func (c *Cluster) writeIdentities(pt ports) error {
	c.host = "https://127.0.0.1:" + strconv.Itoa(pt.apiserver)
	c.tokens = map[string]string{}
	var lines []string
	users := append([]User{
		{Name: AdminUser, Groups: []string{"system:masters"}},
		{Name: RestrictedUser},
	}, c.opts.Users...)
	for _, u := range users {
		if strings.ContainsAny(u.Name, ",\"\n") {
			return fmt.Errorf("user name %q: commas, quotes and newlines are not allowed in a token file", u.Name)
		}
		tok, err := randomToken()
		if err != nil {
			return err
		}
		c.tokens[u.Name] = tok
		line := fmt.Sprintf("%s,%s,%s", tok, u.Name, "uid-"+u.Name)
		if len(u.Groups) > 0 {
			line += `,"` + strings.Join(u.Groups, ",") + `"`
		}
		lines = append(lines, line)
	}
	if err := os.WriteFile(c.tokenFile(), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	for _, u := range []string{AdminUser, RestrictedUser} {
		if _, err := c.KubeconfigFor(u, c.tokens[u]); err != nil {
			return err
		}
	}
	c.restConfig = c.RESTConfigFor(AdminUser, c.tokens[AdminUser])
	cl, err := client.New(c.restConfig, client.Options{Scheme: Scheme()})
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	c.client = cl
	return nil
}

func (c *Cluster) tokenFile() string   { return filepath.Join(c.Dir, "tokens.csv") }
func (c *Cluster) etcdDataDir() string { return filepath.Join(c.Dir, "etcd-data") }
func (c *Cluster) logPath(component string) string {
	return filepath.Join(c.Dir, "logs", component+".log")
}

func (c *Cluster) launch(component string, args ...string) (*process, error) {
	return c.launchEnv(component, nil, args...)
}

func (c *Cluster) launchEnv(component string, env []string, args ...string) (*process, error) {
	p, err := startProcess(component, c.logPath(component), c.tools[component], env, args...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

func (c *Cluster) proc(component string) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.procs) - 1; i >= 0; i-- {
		if c.procs[i].name == component {
			return c.procs[i]
		}
	}
	return nil
}

func (c *Cluster) kwokProc() *process { return c.proc(Kwok) }

func (c *Cluster) mark(phase string, since time.Time) {
	c.mu.Lock()
	c.timings = append(c.timings, Timing{Phase: phase, Duration: time.Since(since)})
	c.mu.Unlock()
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

// Timings returns how long each start-up phase took (parallel phases overlap).
func (c *Cluster) Timings() []Timing {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Timing(nil), c.timings...)
}

func (c *Cluster) timingSummary() string {
	var parts []string
	for _, t := range c.Timings() {
		parts = append(parts, t.Phase+" "+t.Duration.Round(time.Millisecond).String())
	}
	return strings.Join(parts, ", ")
}

// StartDuration is the wall time New took, retries included.
func (c *Cluster) StartDuration() time.Duration { return c.startDuration }

// Mode reports which components run.
func (c *Cluster) Mode() Mode { return c.opts.Mode }

// Host is the apiserver URL, https://127.0.0.1:<port>.
func (c *Cluster) Host() string { return c.host }

// CAPEM is the PEM of the CA that signed the apiserver's serving certificate.
func (c *Cluster) CAPEM() []byte { return append([]byte(nil), c.pki.caPEM...) }

// Token returns the static bearer token of a user from the token file.
func (c *Cluster) Token(user string) (string, bool) {
	tok, ok := c.tokens[user]
	return tok, ok
}

// AdminKubeconfig is the path of a kubeconfig for AdminUser (system:masters).
func (c *Cluster) AdminKubeconfig() string { return c.kubeconfigPath(AdminUser) }

// RestrictedKubeconfig is the path of a kubeconfig for RestrictedUser.
func (c *Cluster) RestrictedKubeconfig() string { return c.kubeconfigPath(RestrictedUser) }

// RESTConfig returns a fresh admin config; callers may modify it.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// RestrictedRESTConfig returns a config authenticating as RestrictedUser.
func (c *Cluster) RestrictedRESTConfig() *rest.Config {
	return c.RESTConfigFor(RestrictedUser, c.tokens[RestrictedUser])
}

// RESTConfigFor returns a config presenting token; user only names it.
// Any token the apiserver accepts works: a static one (Token) or a
// ServiceAccount token from the TokenRequest API.
func (c *Cluster) RESTConfigFor(user, token string) *rest.Config {
	return &rest.Config{
		Host:            c.host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), c.pki.caPEM...)},
		UserAgent:       "flotilla-testenv/" + user,
		// Tests create objects in bursts; client-side throttling only slows them.
		QPS:   200,
		Burst: 400,
	}
}

// Client is a controller-runtime client for AdminUser whose scheme knows the
// client-go types, apiextensions and Volcano's batch, scheduling and bus APIs.
func (c *Cluster) Client() client.Client { return c.client }

func (c *Cluster) kubeconfigPath(user string) string {
	return filepath.Join(c.Dir, "kubeconfig-"+safeName(user)+".yaml")
}

// KubeconfigFor writes a kubeconfig presenting token as user to this cluster
// and returns its path (overwriting an earlier one for the same user).
func (c *Cluster) KubeconfigFor(user, token string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.host, CertificateAuthorityData: c.pki.caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	ctxName := user + "@" + c.Name
	cfg.Contexts[ctxName] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: user, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = ctxName
	path := c.kubeconfigPath(user)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write kubeconfig for %s: %w", user, err)
	}
	return path, nil
}

// CreateNamespace creates a namespace and, in a Full cluster, waits for its
// "default" ServiceAccount so pods can be created in it right away.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	if c.opts.Mode != Full {
		return nil
	}
	return c.waitDefaultServiceAccount(ctx, name, c.proc(KubeControllerManager))
}

// LogPath returns the log file of a component (see the component constants).
func (c *Cluster) LogPath(component string) string { return c.logPath(component) }

// LogTails returns the last n lines of every started component's log.
func (c *Cluster) LogTails(n int) string {
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "===== %s: last %d lines of %s =====\n%s\n", p.name, n, p.logPath, tailFile(p.logPath, n))
	}
	return b.String()
}

// Stop terminates every component (SIGTERM, SIGKILL after a grace period)
// and removes the cluster's data. It is idempotent.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopProcesses()
		c.stopErr = c.removeData()
	})
	return c.stopErr
}

// stopProcesses stops clients of the apiserver first (all at once), then the
// apiserver, then etcd, so nothing logs spurious connection errors.
func (c *Cluster) stopProcesses() {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	var wg sync.WaitGroup
	var apiserver, etcd *process
	for _, p := range procs {
		switch p.name {
		case KubeAPIServer:
			apiserver = p
		case Etcd:
			etcd = p
		default:
			wg.Go(func() { p.stop(stopGrace) })
		}
	}
	wg.Wait()
	for _, p := range []*process{apiserver, etcd} {
		if p != nil {
			p.stop(stopGrace)
		}
	}
	// Keep the exited processes listed so LogTails still finds their logs.
	c.mu.Lock()
	c.procs = append(procs, c.procs...)
	c.mu.Unlock()
}

func (c *Cluster) removeData() error {
	if c.ownsDir {
		if err := os.RemoveAll(c.Dir); err != nil {
			return fmt.Errorf("remove %s: %w", c.Dir, err)
		}
		return nil
	}
	if err := os.RemoveAll(c.etcdDataDir()); err != nil {
		return fmt.Errorf("remove etcd data: %w", err)
	}
	return nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func safeName(s string) string {
	s = unsafeChars.ReplaceAllString(s, "_")
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

// PIDs are the cluster's component processes (running or exited), so a
// caller can check that Stop left none behind.
func (c *Cluster) PIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pids []int
	for _, p := range c.procs {
		if p.cmd.Process != nil {
			pids = append(pids, p.cmd.Process.Pid)
		}
	}
	return pids
}
