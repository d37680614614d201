package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// The peer benchmark's settings, the same for both systems: a new commit is
// looked for every second (Flux: the GitRepository's interval; Flotilla:
// --poll-interval), and every unit is checked for drift every 10 minutes
// (Flux: each Kustomization's interval, as `flux bootstrap` sets it;
// Flotilla: --interval). With a 1-minute drift check Flux did not get 200
// units applied within 10 minutes on the shared 2-core machine (it must
// re-reconcile 200 Kustomizations a minute while catching up).
const (
	peerPoll      = time.Second
	peerInterval  = 10 * time.Minute
	peerIdle      = time.Minute
	peerFluxNS    = "flux-system"
	peerAgentNS   = "flotilla-system"
	peerFluxUser  = "flux"
	peerChangeImg = "nginx:1.28"
	// Defaults for the idle Git traffic at default intervals: flotilla-agent
	// polls once per --interval (1m, --poll-interval 0) and commits an
	// unchanged status every --heartbeat-interval (10m); `flux create source
	// git` gives a GitRepository a 1m interval.
	peerDefaultPollsPerHour      = 60
	peerDefaultHeartbeatsPerHour = 6
)

// peerFluxArgs are the flags both Flux controllers run with beyond the
// addresses; everything else is the controllers' default (source-controller
// --concurrent 2, kustomize-controller --concurrent 4 --concurrent-ssa 4,
// both --kube-api-qps 50 --kube-api-burst 300).
var peerFluxArgs = []string{"--watch-all-namespaces=true", "--enable-leader-election=false", "--log-level=info", "--events-addr="}

// BenchmarkPeerFlux runs the pinned Flux source-controller and
// kustomize-controller (tools/flux: `tools/build.sh bin flux`) and then
// flotilla-agent, each on a fresh minimal API server, on the objects of
// BenchmarkAgent/flux-shape (units × Deployment, ServiceAccount, Service,
// Ingress in 10 namespaces) from two identical repos of one Git server,
// and writes one table with ratios to test/results/bench-peer-flux.md:
//
//	make bench-flux
//	# or: tools/build.sh bin flux && make build &&
//	#     go test -run '^$' -bench 'PeerFlux$' -benchtime 1x -timeout 150m ./test/bench/
//
// Flux gets one GitRepository and one Kustomization per unit (path
// apps/<unit>/manifests, targetNamespace, prune, no wait); its namespaces
// exist beforehand. flotilla-agent commits its status to the fleet repo
// through the Git server. API requests are the API server's
// apiserver_request_total; writes leave out leases (the API server's own
// identity heartbeats, the same on both sides; neither system elects a
// leader here). FLOTILLA_BENCH_PEER_UNITS sets the sizes (default
// "200,1000"); FLOTILLA_BENCH_PEER_FLUX_TIMEOUT caps how long Flux may take
// to apply everything (default 20m): past it, Flux's figures are those of a
// run that did not finish; FLOTILLA_BENCH_PEER_FLUX_SETTLE_TIMEOUT (default
// the same) caps the wait, after the one-unit commit, for every unit to
// reach it (past it, that figure is a lower bound and the others stand).
// It is skipped unless bin/ holds the controllers.
func BenchmarkPeerFlux(b *testing.B) {
	ctrllog.SetLogger(logr.Discard())
	bins, err := peerFluxBinaries()
	if err != nil {
		b.Skipf("Flux controllers not built (run `tools/build.sh bin flux` or `make bench-flux`): %v", err)
	}
	sizes := []int{200, 1000}
	if s := os.Getenv("FLOTILLA_BENCH_PEER_UNITS"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("FLOTILLA_BENCH_PEER_UNITS=%q: %q is not a unit count", s, f)
			}
			sizes = append(sizes, n)
		}
	}
	fluxTimeout := 20 * time.Minute
	if s := os.Getenv("FLOTILLA_BENCH_PEER_FLUX_TIMEOUT"); s != "" {
		if fluxTimeout, err = time.ParseDuration(s); err != nil {
			b.Fatalf("FLOTILLA_BENCH_PEER_FLUX_TIMEOUT: %v", err)
		}
	}
	settleTimeout := fluxTimeout
	if s := os.Getenv("FLOTILLA_BENCH_PEER_FLUX_SETTLE_TIMEOUT"); s != "" {
		if settleTimeout, err = time.ParseDuration(s); err != nil {
			b.Fatalf("FLOTILLA_BENCH_PEER_FLUX_SETTLE_TIMEOUT: %v", err)
		}
	}
	report := peerReport{loadStart: LoadAverage(), started: time.Now()}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("units=%d", n), func(b *testing.B) {
			report.runs = append(report.runs, benchPeer(b, bins, n, fluxTimeout, settleTimeout))
		})
	}
	report.loadEnd = LoadAverage()
	out := filepath.Join(agentproc.ModuleRoot(), "test", "results", "bench-peer-flux.md")
	if err := os.WriteFile(out, []byte(report.markdown()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s", out)
}

// peerBinaries are the Flux controllers and their CRDs in bin/.
type peerBinaries struct{ source, kustomize, crds string }

func peerFluxBinaries() (peerBinaries, error) {
	dir, err := testenv.BinDir()
	if err != nil {
		return peerBinaries{}, err
	}
	p := peerBinaries{
		source:    filepath.Join(dir, "source-controller"),
		kustomize: filepath.Join(dir, "kustomize-controller"),
		crds:      filepath.Join(dir, "flux", "crds"),
	}
	for _, f := range []string{p.source, p.kustomize, p.crds} {
		if _, err := os.Stat(f); err != nil {
			return peerBinaries{}, err
		}
	}
	return p, nil
}

// peerSide is what one system did at one size.
type peerSide struct {
	flags []string
	// heartbeat: the side commits an unchanged status through Git every
	// --heartbeat-interval (flotilla-agent; Flux has no heartbeat).
	heartbeat bool
	// applied is how many units were applied at the head commit when the
	// cold phase ended (all of them unless Flux hit the timeout).
	applied int
	cold    time.Duration // process start → every unit applied
	coldCPU time.Duration
	coldAPI apiCounts
	coldGit gitserver.Stats
	// change: a commit changing one unit's image.
	changed      bool          // the change phase ran
	changeSeen   time.Duration // push → the changed Deployment has the new image
	changeSettle time.Duration // push → every unit reports the new commit
	// settleCapped: changeSettle ran into the settle cap with only settled
	// units at the new commit (a lower bound).
	settleCapped bool
	settled      int
	changeAPI    apiCounts
	changeGit    gitserver.Stats
	idleCPU      time.Duration
	idleAPI      apiCounts
	idleGit      gitserver.Stats
	peak, steady int64 // bytes
}

type peerRun struct {
	units        int
	flux, agent  peerSide
	fluxTimedOut bool
	note         string
}

func benchPeer(b *testing.B, bins peerBinaries, n int, fluxTimeout, settleTimeout time.Duration) peerRun {
	dir := b.TempDir()
	agentBenchFleet(b, dir, n)
	agentBenchRender(b, dir)
	tree := agentBenchTree(b, dir)
	srv := gitserver.Start(b, gitserver.ForgeConfig())
	if err := srv.AddUser(gitserver.AgentUser(agentBenchCluster), "bench-secret", gitserver.AgentRule(agentBenchCluster)); err != nil {
		b.Fatal(err)
	}
	// Flux only reads: no push rule.
	if err := srv.AddUser(peerFluxUser, "bench-secret"); err != nil {
		b.Fatal(err)
	}
	fluxURL := srv.MustCreateRepo(b, "fleet-flux", dir)
	agentURL := srv.MustCreateRepo(b, "fleet", dir)
	// The one-unit change, pushed later to each repo against the same tree.
	app := agentBenchApp(n / 2)
	agentBenchWrite(b, dir, "apps/"+app+"/manifests/objects.yaml", agentBenchObjects(app, peerChangeImg))
	agentBenchRender(b, dir)
	change := peerChange{srv: srv, dir: dir, tree: tree, app: app, namespace: agentBenchNamespace(n / 2)}

	run := peerRun{units: n}
	b.Logf("%d units: Flux first (machine load %s)", n, LoadAverage())
	run.flux, run.fluxTimedOut = benchPeerFlux(b, bins, n, fluxURL, change.with("fleet-flux"), fluxTimeout, settleTimeout)
	b.Logf("%d units: flotilla-agent (machine load %s)", n, LoadAverage())
	run.agent = benchPeerAgent(b, n, agentURL, change.with("fleet"))
	if run.fluxTimedOut {
		run.note = fmt.Sprintf("Flux had applied %d of %d units at the head commit when the cap of %s ran out: its cold figure is a lower bound and the later phases were not run.", run.flux.applied, n, fluxTimeout)
	} else if run.flux.settleCapped {
		run.note = fmt.Sprintf("After the one-unit commit, Flux had %d of %d units at the new commit when the cap of %s ran out: its \"every unit at the new commit\" figure is a lower bound.", run.flux.settled, n, settleTimeout)
	}
	return run
}

// peerChange pushes the prepared one-unit commit to one repo.
type peerChange struct {
	srv            *gitserver.Server
	dir, repo, app string
	namespace      string
	tree           map[string]string
}

func (c peerChange) with(repo string) peerChange { c.repo = repo; return c }

// push commits the change and returns its hash and when it was pushed.
// The push itself (a shallow clone and a push by the maintainer) is left
// out of m's Git figures.
func (c peerChange) push(b *testing.B, m *peerMeter) (string, time.Time) {
	hash, _, _ := agentBenchPush(b, c.srv, c.repo, c.dir, c.tree, "change "+c.app)
	m.git = c.srv.Stats(c.repo)
	return hash, time.Now()
}

// waitImage polls the changed Deployment until it has the new image.
func (c peerChange) waitImage(ctx context.Context, b *testing.B, k client.Client, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d := &appsv1.Deployment{}
		err := k.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.app}, d)
		if err == nil && len(d.Spec.Template.Spec.Containers) > 0 && d.Spec.Template.Spec.Containers[0].Image == peerChangeImg {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("Deployment %s/%s not changed to %s within %s (last error %v)", c.namespace, c.app, peerChangeImg, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// peerProcs are the processes of one system, measured together.
type peerProcs []*agentProcess

func (ps peerProcs) cpu() (d time.Duration) {
	for _, p := range ps {
		d += p.cpu()
	}
	return d
}

// kib sums a /proc/<pid>/status field over the processes, in bytes.
func (ps peerProcs) bytes(field string) (n int64) {
	for _, p := range ps {
		n += p.StatusKiB(field) << 10
	}
	return n
}

// stop ends the processes and returns the sum of their peak RSS (rusage).
func (ps peerProcs) stop() (peak int64) {
	for _, p := range ps {
		p.Stop(time.Minute)
		peak += p.PeakRSS()
	}
	return peak
}

// preparePeerFlux readies a fresh API server for Flux: its CRDs, the
// namespaces (the same flotilla-agent creates from the fleet's list) and
// the Git credentials Secret its GitRepository names.
func preparePeerFlux(ctx context.Context, b *testing.B, c *testenv.Cluster, bins peerBinaries) client.Client {
	b.Helper()
	crds, err := filepath.Glob(filepath.Join(bins.crds, "*.yaml"))
	if err != nil || len(crds) == 0 {
		b.Fatalf("no CRDs in %s: %v", bins.crds, err)
	}
	if err := c.ApplyCRDFiles(ctx, crds...); err != nil {
		b.Fatal(err)
	}
	for _, ns := range append([]string{peerFluxNS}, peerNamespaces()...) {
		if err := c.CreateNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
	}
	k := c.Client()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-auth", Namespace: peerFluxNS},
		StringData: map[string]string{"username": peerFluxUser, "password": "bench-secret"},
	}
	if err := k.Create(ctx, secret); err != nil {
		b.Fatal(err)
	}
	return k
}

// peerAgentArgs are flotilla-agent's arguments for cluster c following
// url, as the peer benchmarks run it; flags are those that differ from its
// defaults (for the results' flag list).
func peerAgentArgs(b *testing.B, c *testenv.Cluster, url string) (args, flags []string) {
	creds := agentproc.CredentialsDir(b, gitserver.AgentUser(agentBenchCluster), "bench-secret")
	flags = []string{"--interval", peerInterval.String(), "--poll-interval", peerPoll.String()}
	args = append([]string{
		"--kubeconfig", c.AdminKubeconfig(), "--cluster-name", agentBenchCluster, "--repo-url", url,
		"--git-credentials-dir", creds, "--cache-dir", b.TempDir(), "--namespace", peerAgentNS,
		"--metrics-addr", "127.0.0.1:0", "--health-addr", "0", "--log-format", "json",
	}, flags...)
	return args, flags
}

func benchPeerFlux(b *testing.B, bins peerBinaries, n int, url string, change peerChange, timeout, settleTimeout time.Duration) (peerSide, bool) {
	c := testenv.StartCluster(b, testenv.ClusterOptions{Mode: testenv.Minimal})
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Minute)
	defer cancel()
	k := preparePeerFlux(ctx, b, c, bins)
	for _, o := range peerFluxObjects(n, url) {
		if err := k.Create(ctx, o); err != nil {
			b.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	storage := peerFreeAddr(b)
	env := []string{"KUBECONFIG=" + c.AdminKubeconfig(), "RUNTIME_NAMESPACE=" + peerFluxNS}
	sourceArgs := append([]string{"--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0",
		"--storage-path=" + b.TempDir(), "--storage-addr=" + storage, "--storage-adv-addr=" + storage}, peerFluxArgs...)
	kustomizeArgs := append([]string{"--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0"}, peerFluxArgs...)
	// Addresses and the temporary storage path say nothing about fairness.
	side := peerSide{flags: []string{
		"source-controller --storage-path=<tmp> --storage-addr=<loopback> " + strings.Join(peerFluxArgs, " "),
		"kustomize-controller " + strings.Join(peerFluxArgs, " "),
		fmt.Sprintf("Flux objects: GitRepository interval %s; one Kustomization per unit, interval %s, prune, wait false", peerPoll, peerInterval),
	}}

	meter := newPeerMeter(ctx, b, c, change)
	start := time.Now()
	procs := peerProcs{
		{Process: agentproc.Start(b, agentproc.Options{Name: "source-controller", Bin: bins.source, Args: sourceArgs, Env: env, LogTail: 40}), b: b},
		{Process: agentproc.Start(b, agentproc.Options{Name: "kustomize-controller", Bin: bins.kustomize, Args: kustomizeArgs, Env: env, LogTail: 40}), b: b},
	}
	meter.procs = procs
	head := change.srv.Head(change.repo, "main")
	applied, err := peerWaitFlux(ctx, k, n, head, 5*time.Second, timeout)
	side.applied = applied
	side.cold = time.Since(start)
	side.coldCPU, side.coldAPI, side.coldGit = meter.read()
	b.Logf("Flux cold: %d of %d units applied at %s in %s; CPU %s; API %+v; Git %+v; load %s", applied, n, head[:8], side.cold.Round(time.Millisecond), side.coldCPU.Round(time.Millisecond), side.coldAPI, side.coldGit, LoadAverage())
	if errors.Is(err, context.DeadlineExceeded) {
		side.peak = procs.stop()
		return side, true
	}
	if err != nil {
		b.Fatal(err)
	}
	if got := peerCountDeployments(ctx, b, k, client.MatchingLabels{"kustomize.toolkit.fluxcd.io/namespace": peerFluxNS}); got != n {
		b.Fatalf("%d Deployments applied by Flux, want %d", got, n)
	}

	// One unit changes: the commit reaches source-controller at its next
	// poll; every Kustomization then reconciles the new revision.
	side.changed = true
	meter.restart()
	hash, pushed := change.push(b, meter)
	change.waitImage(ctx, b, k, timeout)
	side.changeSeen = time.Since(pushed)
	settled, err := peerWaitFlux(ctx, k, n, hash, 2*time.Second, max(settleTimeout-time.Since(pushed), 0))
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		side.settleCapped, side.settled = true, settled
	case err != nil:
		b.Fatalf("Flux after the one-unit commit: %v", err)
	}
	side.changeSettle = time.Since(pushed)
	_, side.changeAPI, side.changeGit = meter.read()
	b.Logf("Flux one-unit change: applied %s after the push, %d of %d Kustomizations at the new commit after %s; API %+v; Git %+v",
		side.changeSeen.Round(time.Millisecond), settled, n, side.changeSettle.Round(time.Millisecond), side.changeAPI, side.changeGit)

	side.finish(meter)
	return side, false
}

func benchPeerAgent(b *testing.B, n int, url string, change peerChange) peerSide {
	c := testenv.StartCluster(b, testenv.ClusterOptions{Mode: testenv.Minimal})
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := c.CreateNamespace(ctx, peerAgentNS); err != nil {
		b.Fatal(err)
	}
	args, flags := peerAgentArgs(b, c, url)
	side := peerSide{heartbeat: true, flags: []string{"flotilla-agent " + strings.Join(append(flags, strings.Fields(os.Getenv("FLOTILLA_BENCH_AGENT_ARGS"))...), " ") +
		" (defaults otherwise: --workers 8 --kube-api-qps 100 --kube-api-burst 300; status committed to the fleet repo's refs/heads/flotilla/status/" + agentBenchCluster + ", --heartbeat-interval 10m)"}}

	meter := newPeerMeter(ctx, b, c, change)
	p := startAgentProcess(b, args...)
	meter.procs = peerProcs{p}
	cold := p.WaitCycle(0, 30*time.Minute)
	side.cold = time.Since(p.Started())
	if cold["result"] != "success" || recInt(cold, "applied") != n+1 {
		b.Fatalf("cold cycle: %v\n%s", cold, p.LogTail(20))
	}
	side.applied = n
	// The status commit of the cold cycle is part of its Git cost.
	peerWaitStatusPush(b, change.srv, change.repo, meter.git)
	side.coldCPU, side.coldAPI, side.coldGit = meter.read()
	b.Logf("flotilla-agent cold: %d units applied in %s (cycle %s); CPU %s; API %+v; Git %+v; load %s", n, side.cold.Round(time.Millisecond), recDuration(cold).Round(time.Millisecond), side.coldCPU.Round(time.Millisecond), side.coldAPI, side.coldGit, LoadAverage())
	if got := peerCountDeployments(ctx, b, c.Client(), client.MatchingLabels{"app.kubernetes.io/managed-by": "flotilla"}); got != n {
		b.Fatalf("%d Deployments applied by flotilla-agent, want %d", got, n)
	}

	side.changed = true
	meter.restart()
	cycles := p.Cycles()
	hash, pushed := change.push(b, meter)
	change.waitImage(ctx, b, c.Client(), 10*time.Minute)
	side.changeSeen = time.Since(pushed)
	for {
		rec := p.WaitCycle(cycles, 10*time.Minute)
		if strings.HasSuffix(fmt.Sprint(rec["revision"]), hash) {
			break
		}
		cycles++
	}
	peerWaitStatusPush(b, change.srv, change.repo, meter.git)
	side.changeSettle = time.Since(pushed)
	_, side.changeAPI, side.changeGit = meter.read()
	b.Logf("flotilla-agent one-unit change: applied %s after the push, cycle and status commit done after %s; API %+v; Git %+v",
		side.changeSeen.Round(time.Millisecond), side.changeSettle.Round(time.Millisecond), side.changeAPI, side.changeGit)

	side.finish(meter)
	return side
}

// peerWaitStatusPush waits (up to a minute) for the agent's status commit
// after before: status is written after the cycle's log line.
func peerWaitStatusPush(b *testing.B, srv *gitserver.Server, repo string, before gitserver.Stats) {
	b.Helper()
	for range 600 {
		if srv.Stats(repo).Sub(before).ReceivePacks > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Logf("no status push within a minute of the cycle")
}

// peerMeter measures one phase of one side: its processes' CPU, the API
// server's requests and its repo's Git traffic since the meter started.
type peerMeter struct {
	ctx    context.Context
	b      *testing.B
	c      *testenv.Cluster
	change peerChange
	procs  peerProcs
	cpu    time.Duration
	api    apiCounts
	git    gitserver.Stats
}

// newPeerMeter starts a meter before the processes do (set procs once
// they run: new processes start from no CPU time).
func newPeerMeter(ctx context.Context, b *testing.B, c *testenv.Cluster, change peerChange) *peerMeter {
	m := &peerMeter{ctx: ctx, b: b, c: c, change: change}
	m.restart()
	return m
}

func (m *peerMeter) restart() {
	m.cpu, m.api, m.git = m.procs.cpu(), apiserverRequests(m.ctx, m.b, m.c), m.change.srv.Stats(m.change.repo)
}

// read returns what the phase cost so far.
func (m *peerMeter) read() (time.Duration, apiCounts, gitserver.Stats) {
	return m.procs.cpu() - m.cpu, apiserverRequests(m.ctx, m.b, m.c).sub(m.api), m.change.srv.Stats(m.change.repo).Sub(m.git)
}

// finish measures peerIdle with no new commit, then the resident memory,
// and stops the processes for their peak.
func (s *peerSide) finish(m *peerMeter) {
	m.restart()
	time.Sleep(peerIdle)
	s.idleCPU, s.idleAPI, s.idleGit = m.read()
	s.steady = m.procs.bytes("VmRSS")
	s.peak = m.procs.stop()
	m.b.Log(s.idleLogLine())
	if peerPolls(s.idleGit) == 0 {
		// Both sides poll every second: none counted means a kind of poll
		// the counting misses, and the per-poll figures would be empty.
		m.b.Errorf("no Git poll counted in the idle minute: %+v", s.idleGit)
	}
}

// idleLogLine is the raw log's line for the idle minute. Its Git figures
// come from the function the table's idle rows use, so the raw log and the
// table cannot disagree; peerRunsFromLog reads the line back.
func (s peerSide) idleLogLine() string {
	return fmt.Sprintf("%s idle %s: CPU %s; API %+v; %s; RSS %d MiB, peak %d MiB", s.flags[0][:strings.IndexByte(s.flags[0], ' ')], peerIdle, s.idleCPU, s.idleAPI, peerIdleGitLog(s), s.steady>>20, s.peak>>20)
}

func peerNamespaces() []string {
	out := make([]string, agentBenchNamespaces)
	for i := range out {
		out[i] = agentBenchNamespace(i)
	}
	return out
}

// peerFluxObjects are the GitRepository and one Kustomization per unit.
func peerFluxObjects(n int, url string) []*unstructured.Unstructured {
	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
		"metadata": map[string]any{"name": "fleet", "namespace": peerFluxNS},
		"spec": map[string]any{
			"url": url, "ref": map[string]any{"branch": "main"}, "interval": peerPoll.String(),
			"timeout": "60s", "secretRef": map[string]any{"name": "fleet-auth"},
		},
	}}
	out := []*unstructured.Unstructured{repo}
	for i := range n {
		name := agentBenchApp(i)
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
			"metadata": map[string]any{"name": name, "namespace": peerFluxNS},
			"spec": map[string]any{
				"interval": peerInterval.String(), "path": "./apps/" + name + "/manifests", "prune": true, "wait": false,
				"timeout": "2m", "targetNamespace": agentBenchNamespace(i),
				"sourceRef": map[string]any{"kind": "GitRepository", "name": "fleet"},
			},
		}})
	}
	return out
}

// peerWaitFlux waits until n Kustomizations are Ready with hash applied
// and returns how many were; a context.DeadlineExceeded after timeout. It
// lists them every period: a list of 1,000 Kustomizations is heavy enough
// to slow the API server down if done every second.
func peerWaitFlux(ctx context.Context, k client.Client, n int, hash string, period, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	applied := 0
	for {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
		list.SetKind("KustomizationList")
		if err := k.List(ctx, list, client.InNamespace(peerFluxNS)); err != nil {
			return applied, fmt.Errorf("list Kustomizations: %w", err)
		}
		applied = 0
		for _, it := range list.Items {
			rev, _, _ := unstructured.NestedString(it.Object, "status", "lastAppliedRevision")
			if strings.HasSuffix(rev, hash) && !peerFailed(it) {
				applied++
			}
		}
		if applied >= n {
			return applied, nil
		}
		if time.Now().After(deadline) {
			return applied, fmt.Errorf("%d of %d Kustomizations applied %s after %s: %w", applied, n, hash, timeout, context.DeadlineExceeded)
		}
		time.Sleep(period)
	}
}

// peerFailed: the Kustomization's Ready condition is False. While Flux
// reconciles a Kustomization again Ready is Unknown and lastAppliedRevision
// stays what was applied; at 1,000 units on 2 cores kustomize-controller
// never stops re-reconciling (a 10-minute interval asks for 100 reconciles
// a minute), so requiring Ready True of every unit at once would never be
// met although every unit is applied.
func peerFailed(u unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "False"
		}
	}
	return true
}

func peerCountDeployments(ctx context.Context, b *testing.B, k client.Client, sel client.MatchingLabels) int {
	b.Helper()
	deps := &appsv1.DeploymentList{}
	if err := k.List(ctx, deps, sel); err != nil {
		b.Fatal(err)
	}
	return len(deps.Items)
}

// peerFreeAddr is a free loopback address for source-controller's artifact
// server, whose advertised address must be known before it starts.
func peerFreeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// apiCounts are API requests the API server served (apiserver_request_total).
type apiCounts struct {
	Writes  float64 // POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION, not dry-run, not leases
	DryRuns float64 // the same verbs with dryRun=All
	// ByResource are the writes by "verb resource[/subresource]", for the log.
	ByResource map[string]float64
}

func (a apiCounts) sub(b apiCounts) apiCounts {
	out := apiCounts{Writes: a.Writes - b.Writes, DryRuns: a.DryRuns - b.DryRuns, ByResource: map[string]float64{}}
	for k, v := range a.ByResource {
		if d := v - b.ByResource[k]; d != 0 {
			out.ByResource[k] = d
		}
	}
	return out
}

var promLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// apiserverRequests reads the API server's /metrics as the admin.
func apiserverRequests(ctx context.Context, b *testing.B, c *testenv.Cluster) apiCounts {
	b.Helper()
	cfg := c.RESTConfig()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatalf("GET /metrics of the API server: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET /metrics of the API server: %d %v", resp.StatusCode, err)
	}
	return parseAPIRequests(string(body))
}

func parseAPIRequests(metrics string) apiCounts {
	out := apiCounts{ByResource: map[string]float64{}}
	writes := []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		labels, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		l := map[string]string{}
		for _, m := range promLabel.FindAllStringSubmatch(labels, -1) {
			l[m[1]] = m[2]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || !slices.Contains(writes, l["verb"]) || l["resource"] == "leases" {
			continue
		}
		if l["dry_run"] != "" {
			out.DryRuns += v
		} else {
			out.Writes += v
			res := l["resource"]
			if l["subresource"] != "" {
				res += "/" + l["subresource"]
			}
			out.ByResource[l["verb"]+" "+res] += v
		}
	}
	return out
}
