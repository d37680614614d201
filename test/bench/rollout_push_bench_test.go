package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/cijob"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// The push-to-last-wave benchmark's fleet and agents: three clusters in
// three waves, bake 0; agents as deployed with --interval 1m
// --poll-interval 10s (FLOTILLA_BENCH_AGENT_POLL sets another poll
// interval, e.g. 1m: the agents' default, one poll per interval).
const (
	pushBenchRepo         = "fleet"
	pushBenchAgentCycle   = time.Minute
	pushBenchForgePoll    = 250 * time.Millisecond
	pushBenchGoal         = 2 * time.Minute
	pushBenchRolloutJob   = ".github/workflows/flotilla-rollout.yml"
	pushBenchRolloutStep  = "Advance"
	pushBenchBotName      = "flotilla-rollout[bot]"
	pushBenchObserveEvery = 100 * time.Millisecond
)

var pushBenchClusters = []string{"a1", "b2", "c3"}

func pushBenchAgentPoll(b *testing.B) time.Duration {
	b.Helper()
	v := os.Getenv("FLOTILLA_BENCH_AGENT_POLL")
	if v == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > pushBenchAgentCycle {
		b.Fatalf("FLOTILLA_BENCH_AGENT_POLL=%q: want a duration in (0, %s]", v, pushBenchAgentCycle)
	}
	return d
}

func pushBenchFiles() map[string]string {
	files := map[string]string{
		"fleets/prod.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: prod
spec:
  clusters: [a1, b2, c3]
  namespaces: [{name: web}]
  rollout:
    bake: 0s
    waves:
      - {name: canary, clusters: [a1]}
      - {name: second, clusters: [b2]}
`,
		"apps/web/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: web
spec:
  source: {manifests: {path: manifests}}
  namespace: web
  timeout: 30s
  syncPolicies: [{destination: {fleet: prod}}]
`,
		"apps/web/manifests/cm.yaml": pushBenchConfigMap("v1"),
	}
	for _, c := range pushBenchClusters {
		files["clusters/"+c+".yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + c + "\n"
	}
	return files
}

func pushBenchConfigMap(version string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  version: " + version + "\n"
}

// pushBenchAgent is an in-process agent and the status writer that
// pushes its status to the Git server.
type pushBenchAgent struct {
	name    string
	cluster *testenv.Cluster
	writer  *statuswriter.Writer
}

// live is the version web's ConfigMap holds on the cluster.
func (a *pushBenchAgent) live(ctx context.Context) string {
	var cm corev1.ConfigMap
	if err := a.cluster.Client().Get(ctx, client.ObjectKey{Namespace: "web", Name: "web"}, &cm); err != nil {
		return ""
	}
	return cm.Data["version"]
}

// readyAt says whether the status the agent last pushed reports web
// Ready at hash.
func (a *pushBenchAgent) readyAt(hash string) bool {
	doc := a.writer.Committed()
	if doc == nil {
		return false
	}
	for _, u := range doc.Units {
		if u.Name == "web" {
			return u.ReadyHash == hash && status.UnitReady(u)
		}
	}
	return false
}

// BenchmarkRolloutPushToLastWave measures how long a good change takes
// from its push to main to the last wave's cluster, through 3 waves with
// bake 0, on the local Git server (test/gitserver: git-http-backend) with
// three real clusters (kube-apiserver and etcd) and in-process agents
// (--interval 1m --poll-interval 10s, or FLOTILLA_BENCH_AGENT_POLL) that
// push their status to refs/heads/flotilla/status/<cluster>.
//
// The benchmark is the forge. GitHub's `on: push` with its paths filter:
// looking at main every 250ms, on a push that changes rendered/rollouts/
// by anyone but the job's bot (pushes made with the workflow's token
// start nothing), it runs the template's GitHub rollout job — the Advance
// step of .github/workflows/flotilla-rollout.yml as written, with the
// variables the workflow sets — in a fresh clone, one run at a time (the
// concurrency group), with bin/flotilla built from this tree. The job
// then follows the status refs by itself.
//
// Reported: push → each wave's cluster live at the new version (its
// ConfigMap) and Ready at the new revision (its pushed status; ns/op runs
// to the last one Ready), and how long the job took from a wave's Ready
// status to its advance commit on main. A real runner's start-up (queue,
// installing flotilla), paid once per rollout, is not in the figure.
//
//	go test ./test/bench -run '^$' -bench BenchmarkRolloutPushToLastWave -benchtime 1x
//
// with FLOTILLA_BIN_DIR naming the directory of etcd and kube-apiserver
// (tools/build.sh). FLOTILLA_BENCH_ENFORCE=1 turns a missed goal (last
// wave live within 2 minutes) into a failure.
func BenchmarkRolloutPushToLastWave(b *testing.B) {
	// ns/op is the push to the last wave Ready, not the clusters' start.
	b.StopTimer()
	ctx := context.Background()
	cli := pushBenchCLI(b)
	cs := testenv.StartClusters(b, len(pushBenchClusters), testenv.ClusterOptions{Mode: testenv.Minimal})
	srv := gitserver.Start(b, gitserver.ForgeConfig(pushBenchClusters...))

	dir := b.TempDir()
	treefile.Write(b, dir, pushBenchFiles())
	pushBenchRun(b, "", filepath.Join(cli, "flotilla"), "render", "--repo", dir)
	url := srv.MustCreateRepo(b, pushBenchRepo, dir)
	agents := make([]*pushBenchAgent, len(pushBenchClusters))
	for i, name := range pushBenchClusters {
		agents[i] = startPushBenchAgent(b, srv, url, name, cs[i], pushBenchAgentPoll(b))
	}
	wf, err := cijob.Load(filepath.Join(agentproc.ModuleRoot(), "fleet-repo-template", pushBenchRolloutJob))
	if err != nil {
		b.Fatal(err)
	}
	script, err := cijob.GitHubStep(wf, "advance", pushBenchRolloutStep)
	if err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+cli+string(os.PathListSeparator)+os.Getenv("PATH"), "GH_LOG="+filepath.Join(b.TempDir(), "gh.log"),
		"HOME="+b.TempDir(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	env = append(env, cijob.GitHubEnv(wf)...)
	env = append(env, "EVENT=push", "GITHUB_RUN_ID=1")

	for i := 0; i < b.N; i++ {
		b.StopTimer()
		from, to := fmt.Sprintf("v%d", i+1), fmt.Sprintf("v%d", i+2)
		// Every cluster has the current version and says so.
		work := filepath.Join(b.TempDir(), "work")
		pushBenchRun(b, "", "git", "clone", "-q", "--branch", "main", srv.UserURL(pushBenchRepo, gitserver.Maintainer), work)
		settle := time.Now().Add(3 * time.Minute)
		for _, a := range agents {
			hash := pushBenchUnitHash(b, work, a.name)
			for a.live(ctx) != from || !a.readyAt(hash) {
				if time.Now().After(settle) {
					b.Fatalf("%s: web is not live and Ready at %s", a.name, from)
				}
				time.Sleep(time.Second)
			}
		}

		// The change, rendered (wave 1 released) as in its pull request.
		treefile.Write(b, work, map[string]string{"apps/web/manifests/cm.yaml": pushBenchConfigMap(to)})
		pushBenchRun(b, "", filepath.Join(cli, "flotilla"), "render", "--repo", work)
		want := pushBenchUnitHash(b, work, "a1")
		pushBenchRun(b, work, "git", "add", "-A")
		pushBenchRun(b, work, "git", "-c", "user.name=maintainer", "-c", "user.email=maintainer@example.com", "commit", "-q", "-m", "web "+to)

		var (
			mu   sync.Mutex
			logs []string
		)
		forge := cijob.NewForge(ctx, func(ctx context.Context, n int) error {
			clone := filepath.Join(b.TempDir(), "job")
			if out, err := exec.CommandContext(ctx, "git", "clone", "-q", "--branch", "main", srv.UserURL(pushBenchRepo, gitserver.Maintainer), clone).CombinedOutput(); err != nil {
				return fmt.Errorf("checkout: %w: %s", err, out)
			}
			out, err := cijob.Run(ctx, clone, script, env)
			mu.Lock()
			logs = append(logs, fmt.Sprintf("run %d:\n%s", n, out))
			mu.Unlock()
			return err
		})
		watchCtx, stopWatch := context.WithCancel(ctx)
		pushes := make(chan botPush, 16)
		go pushBenchWatchMain(watchCtx, srv, srv.Head(pushBenchRepo, "main"), forge, pushes)

		b.StartTimer()
		start := time.Now()
		pushBenchRun(b, work, "git", "push", "-q", "origin", "HEAD:main")
		live := make([]time.Duration, len(agents))
		ready := make([]time.Duration, len(agents))
		deadline := start.Add(10 * time.Minute)
		for ready[len(agents)-1] == 0 {
			if time.Now().After(deadline) {
				mu.Lock()
				b.Fatalf("no wave but %v reached %s in 10 minutes; job logs:\n%s", live, to, strings.Join(logs, "\n"))
			}
			for j, a := range agents {
				if live[j] == 0 && a.live(ctx) == to {
					live[j] = time.Since(start)
				}
				if ready[j] == 0 && a.readyAt(want) {
					ready[j] = time.Since(start)
				}
			}
			time.Sleep(pushBenchObserveEvery)
		}
		b.StopTimer()

		// The job ends by itself once the rollout is complete.
		endBy := time.Now().Add(time.Minute)
		for forge.Busy() && time.Now().Before(endBy) {
			time.Sleep(100 * time.Millisecond)
		}
		stillRunning := forge.Busy()
		stopWatch()
		runs, errs := 0, []error(nil)
		if !stillRunning {
			runs, errs = forge.Wait()
		}
		mu.Lock()
		if stillRunning || len(errs) > 0 || runs != 1 {
			b.Fatalf("rollout job: %d run(s), want 1; still running: %v; errors %v\n%s", runs, stillRunning, errs, strings.Join(logs, "\n"))
		}
		advances := drain(pushes)
		if len(advances) != 2 || b.Failed() {
			b.Fatalf("advance commits on main at %v, want 2 (waves second and rest); job log:\n%s", advances, strings.Join(logs, "\n"))
		}
		mu.Unlock()

		// CI's share: from the status push saying a wave is Ready to the
		// advance commit on main.
		ci := []time.Duration{advances[0].Sub(start) - ready[0], advances[1].Sub(start) - ready[1]}
		last := len(agents) - 1
		b.ReportMetric(live[last].Seconds(), "s-push-to-last-wave-live")
		b.ReportMetric(ready[last].Seconds(), "s-push-to-last-wave-ready")
		b.ReportMetric((ci[0] + ci[1]).Seconds(), "s-ready-to-advance-total")
		b.ReportMetric(float64(runs), "job-runs")
		b.Logf("3 waves, bake 0, agents --interval %s --poll-interval %s, job polling the status refs every %ss: push → last wave live %s, Ready %s (goal: live < %s); load %s",
			pushBenchAgentCycle, pushBenchAgentPoll(b), pushBenchEnv(env, "FLOTILLA_ROLLOUT_POLL"), live[last].Round(time.Millisecond), ready[last].Round(time.Millisecond), pushBenchGoal, LoadAverage())
		b.Logf("push → live (ConfigMap %s) / Ready at the revision (status pushed): wave 1 %s / %s, wave 2 %s / %s, wave 3 %s / %s",
			to, live[0].Round(time.Millisecond), ready[0].Round(time.Millisecond), live[1].Round(time.Millisecond), ready[1].Round(time.Millisecond),
			live[2].Round(time.Millisecond), ready[2].Round(time.Millisecond))
		b.Logf("the job (%d run): wave 1 Ready → advance on main %s, wave 2 Ready → advance on main %s (the rest is the agents: poll, apply, status push)",
			runs, ci[0].Round(time.Millisecond), ci[1].Round(time.Millisecond))
		if live[last] > pushBenchGoal {
			msg := "goal missed"
			if os.Getenv("FLOTILLA_BENCH_ENFORCE") == "1" {
				b.Error(msg)
			} else {
				b.Log(msg + " (the machine may be busy; FLOTILLA_BENCH_ENFORCE=1 fails on it)")
			}
		}
	}
}

// pushBenchWatchMain is the forge's push trigger: when main moves with a
// commit by someone other than the job's bot and a change under
// rendered/rollouts/, it triggers the job; it sends the subjects of the
// bot's commits (the advances) to advances.
// botPush is a move of main by the job's bot: when the watcher saw it
// and the commits' subjects.
type botPush struct {
	at       time.Time
	subjects []string
}

func pushBenchWatchMain(ctx context.Context, srv *gitserver.Server, last string, forge *cijob.Forge, advances chan<- botPush) {
	bare := srv.RepoPath(pushBenchRepo)
	for ctx.Err() == nil {
		time.Sleep(pushBenchForgePoll)
		head := srv.Head(pushBenchRepo, "main")
		if head == last {
			continue
		}
		out, err := exec.Command("git", "--git-dir="+bare, "log", "--format=%an|%s", last+".."+head).Output()
		if err != nil {
			continue
		}
		changed, _ := exec.Command("git", "--git-dir="+bare, "diff", "--name-only", last, head, "--", "rendered/rollouts/").Output()
		last = head
		human := false
		var bot []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			author, subject, _ := strings.Cut(l, "|")
			if author == pushBenchBotName {
				bot = append(bot, subject)
			} else {
				human = true
			}
		}
		if len(bot) > 0 {
			advances <- botPush{time.Now(), bot}
		}
		if human && len(strings.TrimSpace(string(changed))) > 0 {
			forge.Trigger()
		}
	}
}

// drain returns, per advance commit, when main had it.
func drain(ch chan botPush) []time.Time {
	var out []time.Time
	for {
		select {
		case p := <-ch:
			for range p.subjects {
				out = append(out, p.at)
			}
		default:
			return out
		}
	}
}

func startPushBenchAgent(b *testing.B, srv *gitserver.Server, url, name string, c *testenv.Cluster, poll time.Duration) *pushBenchAgent {
	b.Helper()
	auth := statusdoc.AgentAuth(srv, name)
	w, err := statuswriter.NewWriter(statuswriter.WriterOptions{
		Cluster: name, URL: url, Auth: auth, Timeout: 20 * time.Second,
		RetryBackoff: gitrepo.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second},
	})
	if err != nil {
		b.Fatal(err)
	}
	ag := agentproc.NewInProcess(b, c, agentproc.InProcessOptions{
		Cluster: name, RepoURL: url, Auth: auth, Namespace: "flotilla-system",
		Sink: w, Alongside: []func(context.Context) error{w.Run},
		Interval: pushBenchAgentCycle, PollInterval: poll, FetchTimeout: 20 * time.Second, Identity: name + "-agent",
	})
	ag.Start()
	return &pushBenchAgent{name: name, cluster: c, writer: w}
}

// pushBenchCLI builds bin/flotilla from this tree into a directory it
// returns, with a gh that only logs (the job starts the slice publisher
// with it).
func pushBenchCLI(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "flotilla"), "./hub/flotilla")
	cmd.Dir = agentproc.ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./hub/flotilla: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "gh"), []byte("#!/bin/sh\necho \"$*\" >> \"$GH_LOG\"\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	return dir
}

func pushBenchUnitHash(b *testing.B, dir, cluster string) string {
	b.Helper()
	s, err := slice.Read(dir, cluster)
	if err != nil {
		b.Fatal(err)
	}
	for _, u := range s.Units {
		if u.Name == "web" {
			return u.Hash
		}
	}
	b.Fatalf("%s has no unit web", cluster)
	return ""
}

func pushBenchRun(b *testing.B, dir, name string, args ...string) {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func pushBenchEnv(env []string, key string) string {
	v := ""
	for _, e := range env {
		if k, val, ok := strings.Cut(e, "="); ok && k == key {
			v = val
		}
	}
	return v
}
