package bench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// The agent benchmark's shape (Flux's: each unit a Deployment with 0
// replicas, a ServiceAccount, a Service and an Ingress) and goals.
const (
	agentBenchUnits      = 1000
	agentBenchNamespaces = 10
	agentBenchCluster    = "bench"

	agentGoalColdApply  = 60 * time.Second
	agentGoalPeakRSS    = 128 << 20
	agentGoalOneUnit    = 2 * time.Second
	agentGoalSteadyRSS  = 64 << 20
	agentBenchInterval  = 20 * time.Second
	agentBenchPoll      = time.Second
	agentBenchFetchApps = 20
)

// BenchmarkAgent runs the flotilla-agent binary (agentproc.Binary:
// bin/flotilla-agent when up to date, else a fresh build) as a child process:
//
//   - flux-shape: a fleet repo (rendered by bin/flotilla) whose slice has
//     1,000 units × 4 objects for one cluster, applied cold into a minimal
//     cluster (wall time, peak RSS); a commit changing one unit (reconcile
//     time after detection, API writes); polls and a drift cycle with no
//     new commit (packs fetched, API writes); steady-state RSS with the
//     4,000 objects managed.
//
//   - fetch: bytes a cold and an incremental fetch transfer from a fleet
//     repo holding 1,000 rendered clusters, against the agent's own slice.
//
//     make build && go test -run '^$' -bench Agent -benchtime 1x ./test/bench/...
//
// FLOTILLA_BENCH_AGENT_ARGS adds agent flags (e.g. "--workers 16");
// FLOTILLA_BENCH_ENFORCE=1 turns a missed goal into a failure.
func BenchmarkAgent(b *testing.B) {
	b.Run("flux-shape", benchAgentFluxShape)
	b.Run("fetch", benchAgentFetch)
}

// agentBenchFleet writes a fleet repo with one cluster and n applications
// of the Flux benchmark shape, each its own unit, without health waits (a
// minimal cluster runs no controllers).
func agentBenchFleet(b *testing.B, dir string, n int) {
	b.Helper()
	files := map[string]string{
		"clusters/" + agentBenchCluster + ".yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + agentBenchCluster + "\n  labels:\n    env: bench\nspec:\n  kubernetesVersion: v1.36.3\n",
	}
	var ns strings.Builder
	for i := range agentBenchNamespaces {
		fmt.Fprintf(&ns, "    - name: %s\n", agentBenchNamespace(i))
	}
	files["fleets/bench.yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: bench\nspec:\n  clusters:\n    - " + agentBenchCluster + "\n  namespaces:\n" + ns.String()
	for i := range n {
		name := agentBenchApp(i)
		files["apps/"+name+"/app.yaml"] = fmt.Sprintf(`apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: %s
spec:
  source:
    manifests:
      path: manifests
  namespace: %s
  wait: false
  syncPolicies:
    - destination:
        clusters: [%s]
`, name, agentBenchNamespace(i), agentBenchCluster)
		files["apps/"+name+"/manifests/objects.yaml"] = agentBenchObjects(name, "nginx:1.27")
	}
	for rel, content := range files {
		agentBenchWrite(b, dir, rel, content)
	}
}

func agentBenchApp(i int) string       { return fmt.Sprintf("app-%04d", i) }
func agentBenchNamespace(i int) string { return fmt.Sprintf("bench-%d", i%agentBenchNamespaces) }

func agentBenchObjects(name, image string) string {
	return strings.NewReplacer("NAME", name, "IMAGE", image).Replace(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: NAME
spec:
  replicas: 0
  selector:
    matchLabels:
      app: NAME
  template:
    metadata:
      labels:
        app: NAME
    spec:
      serviceAccountName: NAME
      containers:
        - name: main
          image: IMAGE
          ports:
            - containerPort: 8080
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: NAME
---
apiVersion: v1
kind: Service
metadata:
  name: NAME
spec:
  selector:
    app: NAME
  ports:
    - port: 80
      targetPort: 8080
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: NAME
spec:
  rules:
    - host: NAME.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: NAME
                port:
                  number: 80
`)
}

func agentBenchWrite(b *testing.B, dir, rel, content string) {
	b.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
}

// agentBenchRender runs bin/flotilla render on dir.
func agentBenchRender(b *testing.B, dir string) time.Duration {
	b.Helper()
	start := time.Now()
	cmd := exec.Command(flotilla(b), "render", "--repo", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("flotilla render: %v\n%s", err, out)
	}
	return time.Since(start)
}

// agentBenchTree reads every regular file of dir (repo-relative paths).
func agentBenchTree(b *testing.B, dir string) map[string]string {
	b.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// agentBenchPush commits what changed between before and the directory.
func agentBenchPush(b *testing.B, srv *gitserver.Server, repo, dir string, before map[string]string, msg string) (string, map[string]string, int) {
	b.Helper()
	now := agentBenchTree(b, dir)
	files := map[string]string{}
	var deletes []string
	for p, c := range now {
		if old, ok := before[p]; !ok || old != c {
			files[p] = c
		}
	}
	for p := range before {
		if _, ok := now[p]; !ok {
			deletes = append(deletes, p)
		}
	}
	hash := srv.Commit(b, repo, gitserver.Maintainer, files, deletes, msg)
	return hash, now, len(files) + len(deletes)
}

// agentProcess is a running flotilla-agent (test/agentproc) and what the
// benchmark measures of it.
type agentProcess struct {
	*agentproc.Process
	b *testing.B
}

func startAgentProcess(b *testing.B, args ...string) *agentProcess {
	b.Helper()
	p := agentproc.Start(b, agentproc.Options{Args: args, ExtraArgsEnv: "FLOTILLA_BENCH_AGENT_ARGS", LogTail: -1})
	return &agentProcess{Process: p, b: b}
}

// apiRequests reads flotilla_kube_api_requests_total by type.
func (p *agentProcess) apiRequests() map[string]float64 {
	p.b.Helper()
	code, body := p.Get("metrics", "/metrics")
	if code != http.StatusOK {
		p.b.Fatalf("GET /metrics: %d %s", code, body)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, `flotilla_kube_api_requests_total{type="`)
		if !ok {
			continue
		}
		typ, val, _ := strings.Cut(rest, `"} `)
		out[typ], _ = strconv.ParseFloat(strings.TrimSpace(val), 64)
	}
	return out
}

// saveProfiles writes the agent's heap and goroutine profiles to
// $FLOTILLA_BENCH_AGENT_PROFILE_DIR when it is set (and the agent was
// started with --pprof-addr via FLOTILLA_BENCH_AGENT_ARGS).
func (p *agentProcess) saveProfiles(phase string) {
	dir := os.Getenv("FLOTILLA_BENCH_AGENT_PROFILE_DIR")
	if dir == "" {
		return
	}
	addr, _ := p.ListenAddr("pprof")
	if addr == "" {
		p.b.Log("no pprof address logged; pass --pprof-addr in FLOTILLA_BENCH_AGENT_ARGS")
		return
	}
	for _, prof := range []string{"heap", "allocs"} {
		resp, err := http.Get("http://" + addr + "/debug/pprof/" + prof + "?gc=1")
		if err != nil {
			p.b.Log(err)
			return
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out := filepath.Join(dir, phase+"-"+prof+".pprof")
		if err := os.WriteFile(out, data, 0o644); err != nil {
			p.b.Log(err)
		}
		p.b.Logf("wrote %s", out)
	}
}

// cpu is the process's user+system CPU time so far (/proc/<pid>/stat).
func (p *agentProcess) cpu() time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	sys, _ := strconv.ParseInt(fields[12], 10, 64)
	const clockTicks = 100 // USER_HZ
	return time.Duration(u+sys) * time.Second / clockTicks
}

// cpuProfile records a CPU profile of the agent for d into
// $FLOTILLA_BENCH_AGENT_PROFILE_DIR (see saveProfiles), in the background.
func (p *agentProcess) cpuProfile(phase string, d time.Duration) {
	dir := os.Getenv("FLOTILLA_BENCH_AGENT_PROFILE_DIR")
	if dir == "" {
		return
	}
	go func() {
		var addr string
		for i := 0; i < 100 && addr == ""; i++ {
			addr, _ = p.ListenAddr("pprof")
			time.Sleep(100 * time.Millisecond)
		}
		if addr == "" {
			return
		}
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())))
		if err != nil {
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		_ = os.WriteFile(filepath.Join(dir, phase+"-cpu.pprof"), data, 0o644)
	}()
}

func recDuration(rec map[string]any) time.Duration {
	v, _ := rec["duration"].(float64) // slog's JSON handler writes nanoseconds
	return time.Duration(v)
}

func recInt(rec map[string]any, key string) int {
	v, _ := rec[key].(float64)
	return int(v)
}

func agentGoal(b *testing.B, missed bool, format string, args ...any) {
	b.Helper()
	if !missed {
		return
	}
	msg := "goal missed: " + fmt.Sprintf(format, args...)
	if os.Getenv("FLOTILLA_BENCH_ENFORCE") == "1" {
		b.Error(msg)
	} else {
		b.Log(msg + " (FLOTILLA_BENCH_ENFORCE=1 fails on it)")
	}
}

func benchAgentFluxShape(b *testing.B) {
	c := testenv.StartCluster(b, testenv.ClusterOptions{Mode: testenv.Minimal})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	const agentNS = "flotilla-system"
	if err := c.CreateNamespace(ctx, agentNS); err != nil {
		b.Fatal(err)
	}
	srv := gitserver.Start(b, gitserver.ForgeConfig())
	user := gitserver.AgentUser(agentBenchCluster)
	if err := srv.AddUser(user, "bench-secret", gitserver.AgentRule(agentBenchCluster)); err != nil {
		b.Fatal(err)
	}
	creds := agentproc.CredentialsDir(b, user, "bench-secret")

	dir := b.TempDir()
	agentBenchFleet(b, dir, agentBenchUnits)
	renderTook := agentBenchRender(b, dir)
	url := srv.MustCreateRepo(b, "fleet", dir)
	tree := agentBenchTree(b, dir)
	b.Logf("fleet repo: %d applications rendered in %s, %d files", agentBenchUnits, renderTook.Round(time.Millisecond), len(tree))

	agentArgs := []string{
		"--kubeconfig", c.AdminKubeconfig(), "--cluster-name", agentBenchCluster, "--repo-url", url,
		"--git-credentials-dir", creds, "--cache-dir", b.TempDir(), "--namespace", agentNS,
		"--interval", agentBenchInterval.String(), "--poll-interval", agentBenchPoll.String(),
		"--metrics-addr", "127.0.0.1:0", "--health-addr", "0", "--log-format", "json",
		// Status goes to the file only: the Git status writer would add its
		// own requests to the Git counters measured here.
		"--status-repo-url", "none",
	}
	b.ResetTimer()
	p := startAgentProcess(b, agentArgs...)

	// 1. Cold apply.
	p.cpuProfile("cold", 40*time.Second)
	cold := p.WaitCycle(0, 15*time.Minute)
	coldWall := time.Since(p.Started())
	coldPeak := p.StatusKiB("VmHWM") << 10
	coldCPU := p.cpu()
	b.StopTimer()
	if cold["result"] != "success" || recInt(cold, "units") != agentBenchUnits+1 || recInt(cold, "applied") != agentBenchUnits+1 {
		b.Fatalf("cold cycle: %v\n%s", cold, p.LogTail(20))
	}
	deps := &appsv1.DeploymentList{}
	if err := c.Client().List(ctx, deps, client.MatchingLabels{"app.kubernetes.io/managed-by": "flotilla"}); err != nil {
		b.Fatal(err)
	}
	if len(deps.Items) != agentBenchUnits {
		b.Fatalf("%d managed Deployments, want %d", len(deps.Items), agentBenchUnits)
	}
	coldReq := p.apiRequests()
	b.Logf("cold apply: %d units × 4 objects in %s (process start to end of cycle %s), agent CPU %s, peak RSS %d MiB; API requests %v; machine load %s",
		agentBenchUnits, recDuration(cold).Round(time.Millisecond), coldWall.Round(time.Millisecond), coldCPU.Round(time.Millisecond), coldPeak>>20, coldReq, LoadAverage())
	b.ReportMetric(recDuration(cold).Seconds(), "s-cold-apply")
	b.ReportMetric(coldWall.Seconds(), "s-cold-process-wall")
	b.ReportMetric(coldCPU.Seconds(), "s-cold-agent-cpu")
	b.ReportMetric(float64(coldPeak)/(1<<20), "MiB-cold-peak-rss")
	b.ReportMetric(coldReq["write"], "cold-api-writes")
	agentGoal(b, recDuration(cold) > agentGoalColdApply || coldPeak > agentGoalPeakRSS,
		"cold apply %s (goal ≤ %s), peak RSS %d MiB (goal ≤ %d MiB)", recDuration(cold), agentGoalColdApply, coldPeak>>20, agentGoalPeakRSS>>20)

	// 2. No new commit: polls ls-remote only; the next full cycle (drift
	// check of every unit) makes no API write.
	gitBefore := srv.Stats("fleet")
	reqBefore := p.apiRequests()
	n := p.Cycles()
	steady := p.WaitCycle(n, 2*agentBenchInterval)
	gitDelta := srv.Stats("fleet").Sub(gitBefore)
	reqDelta := agentBenchSub(p.apiRequests(), reqBefore)
	// A poll is a v2 ls-refs (or, from a v0-only server, a ref advertisement).
	polls := gitDelta.InfoRefs + gitDelta.LsRefs
	b.Logf("no new commit, %s: %d polls (%d bytes), %d packs fetched; drift-check cycle %s: API requests %v",
		agentBenchInterval, polls, gitDelta.BytesSent, gitDelta.UploadPacks, recDuration(steady).Round(time.Millisecond), reqDelta)
	if gitDelta.UploadPacks != 0 || polls == 0 {
		b.Errorf("polls without a new commit: %+v, want ls-remotes and no pack", gitDelta)
	}
	if reqDelta["write"] != 0 {
		b.Errorf("%v API writes without a new commit, want 0", reqDelta["write"])
	}
	b.ReportMetric(float64(gitDelta.UploadPacks), "packs-fetched-no-commit")
	b.ReportMetric(reqDelta["write"], "api-writes-no-commit")
	b.ReportMetric(recDuration(steady).Seconds(), "s-drift-check-cycle")
	// At the end of a drift-check cycle, before the agent hands its memory
	// back: the steady loop's own peak.
	driftRSS := p.StatusKiB("VmRSS") << 10
	b.ReportMetric(float64(driftRSS)/(1<<20), "MiB-drift-cycle-end-rss")
	agentGoal(b, driftRSS > agentGoalPeakRSS, "RSS at the end of a drift-check cycle %d MiB (goal ≤ %d MiB)", driftRSS>>20, agentGoalPeakRSS>>20)

	// 3. A commit changing one unit.
	app := agentBenchApp(agentBenchUnits / 2)
	agentBenchWrite(b, dir, "apps/"+app+"/manifests/objects.yaml", agentBenchObjects(app, "nginx:1.28"))
	agentBenchRender(b, dir)
	reqBefore = p.apiRequests()
	versionsBefore := agentBenchVersions(ctx, b, c.Client())
	n = p.Cycles()
	hash, _, changed := agentBenchPush(b, srv, "fleet", dir, tree, "change "+app)
	pushed := time.Now()
	var one map[string]any
	for {
		one = p.WaitCycle(n, 2*agentBenchInterval)
		if strings.HasSuffix(fmt.Sprint(one["revision"]), hash) {
			break
		}
		n++
	}
	seen := time.Since(pushed)
	reqDelta = agentBenchSub(p.apiRequests(), reqBefore)
	b.Logf("one unit changed (%d files in the commit): reconcile after detection %s (push to end of cycle %s, polling every %s); rendered %d, applied %d; API requests %v",
		changed, recDuration(one).Round(time.Millisecond), seen.Round(time.Millisecond), agentBenchPoll, recInt(one, "rendered"), recInt(one, "applied"), reqDelta)
	if recInt(one, "rendered") != 1 || recInt(one, "applied") != 1 {
		b.Errorf("one-unit commit: %v", one)
	}
	b.ReportMetric(recDuration(one).Seconds(), "s-one-unit-reconcile")
	b.ReportMetric(reqDelta["write"], "api-writes-one-unit")
	agentGoal(b, recDuration(one) > agentGoalOneUnit, "one-unit reconcile %s (goal ≤ %s)", recDuration(one), agentGoalOneUnit)
	// Writes: the changed Deployment, the unit's inventory and the new
	// last accepted revision in the agent's state ConfigMap only.
	if reqDelta["write"] > 4 {
		b.Errorf("%v API writes for a one-object change", reqDelta["write"])
	}
	// No other unit's object was written (a minimal cluster runs no
	// controllers, so only the agent changes resourceVersions).
	var written []string
	versionsAfter := agentBenchVersions(ctx, b, c.Client())
	for id, v := range versionsAfter {
		if was, ok := versionsBefore[id]; !ok || was.rv != v.rv {
			written = append(written, id)
			if v.unit != app {
				b.Errorf("%s of unit %s written by a commit changing only %s", id, v.unit, app)
			}
		}
	}
	if len(versionsAfter) != len(versionsBefore) {
		b.Errorf("%d managed objects before the commit, %d after", len(versionsBefore), len(versionsAfter))
	}
	b.Logf("objects written by the one-unit commit: %v", written)
	b.ReportMetric(float64(len(written)), "objects-written-one-unit")

	// 4. Steady state with 4,000 objects managed.
	n = p.Cycles()
	p.WaitCycle(n, 2*agentBenchInterval)
	time.Sleep(time.Second) // the cycle's memory goes back to the OS after its log line
	steadyRSS := p.StatusKiB("VmRSS") << 10
	steadyAnon, steadyExe := p.StatusKiB("RssAnon")<<10, p.MappedKiB(agentproc.Binary(b))<<10
	b.Logf("steady-state RSS with %d objects managed: %d MiB (goal ≤ %d MiB): anonymous %d MiB, file-backed %d MiB, of which the executable %d MiB",
		4*agentBenchUnits, steadyRSS>>20, agentGoalSteadyRSS>>20, steadyAnon>>20, p.StatusKiB("RssFile")>>10, steadyExe>>20)
	p.saveProfiles("steady")
	b.ReportMetric(float64(steadyRSS)/(1<<20), "MiB-steady-rss")
	b.ReportMetric(float64(steadyAnon)/(1<<20), "MiB-steady-rss-anon")
	b.ReportMetric(float64(steadyExe)/(1<<20), "MiB-steady-rss-executable")
	agentGoal(b, steadyRSS > agentGoalSteadyRSS, "steady-state RSS %d MiB (goal ≤ %d MiB)", steadyRSS>>20, agentGoalSteadyRSS>>20)

	p.Stop(time.Minute)
	peak := p.PeakRSS()
	b.Logf("peak RSS over the run (rusage): %d MiB", peak>>20)
	b.ReportMetric(float64(peak)/(1<<20), "MiB-peak-rss")

	// 5. The same steady state in a restarted agent (same cache): its
	// first cycle finds every unit up to date, renders nothing and writes
	// nothing, so the file-backed part of its RSS (the executable's pages)
	// holds only the code a steady cycle runs, not the cold apply's.
	r := startAgentProcess(b, agentArgs...)
	first := r.WaitCycle(0, 5*time.Minute)
	if recInt(first, "rendered") != 0 || recInt(first, "applied") != 0 || first["result"] != "success" {
		b.Errorf("restarted agent's first cycle: %v", first)
	}
	if w := r.apiRequests()["write"]; w != 0 {
		b.Errorf("restarted agent wrote %v times in a steady cycle, want 0", w)
	}
	time.Sleep(time.Second) // the cycle's memory goes back to the OS after its log line
	restartRSS := r.StatusKiB("VmRSS") << 10
	restartAnon, restartExe := r.StatusKiB("RssAnon")<<10, r.MappedKiB(agentproc.Binary(b))<<10
	b.Logf("restarted agent, first (steady) cycle %s: RSS %d MiB (goal ≤ %d MiB): anonymous %d MiB, file-backed %d MiB, of which the executable %d MiB",
		recDuration(first).Round(time.Millisecond), restartRSS>>20, agentGoalSteadyRSS>>20, restartAnon>>20, r.StatusKiB("RssFile")>>10, restartExe>>20)
	b.ReportMetric(float64(restartRSS)/(1<<20), "MiB-steady-rss-restarted")
	b.ReportMetric(float64(restartAnon)/(1<<20), "MiB-steady-rss-restarted-anon")
	b.ReportMetric(float64(restartExe)/(1<<20), "MiB-steady-rss-restarted-executable")
	agentGoal(b, restartRSS > agentGoalSteadyRSS, "restarted agent's steady RSS %d MiB (goal ≤ %d MiB)", restartRSS>>20, agentGoalSteadyRSS>>20)
	r.Stop(time.Minute)
}

type agentBenchVersion struct{ rv, unit string }

// agentBenchVersions lists the resourceVersion and unit of every object
// the agent manages, by Kind/namespace/name.
func agentBenchVersions(ctx context.Context, b *testing.B, k client.Client) map[string]agentBenchVersion {
	b.Helper()
	out := map[string]agentBenchVersion{}
	sel := client.MatchingLabels{"app.kubernetes.io/managed-by": "flotilla"}
	for kind, list := range map[string]client.ObjectList{
		"Deployment": &appsv1.DeploymentList{}, "ServiceAccount": &corev1.ServiceAccountList{},
		"Service": &corev1.ServiceList{}, "Ingress": &networkingv1.IngressList{}, "Namespace": &corev1.NamespaceList{},
	} {
		if err := k.List(ctx, list, sel); err != nil {
			b.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			b.Fatal(err)
		}
		for _, it := range items {
			o := it.(client.Object)
			out[kind+"/"+o.GetNamespace()+"/"+o.GetName()] = agentBenchVersion{rv: o.GetResourceVersion(), unit: o.GetLabels()["flotilla.dev/unit"]}
		}
	}
	return out
}

func agentBenchSub(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		out[k] = v - b[k]
	}
	return out
}

// benchAgentFetch measures what the agent's Git source transfers from a
// fleet repo of 1,000 rendered clusters.
func benchAgentFetch(b *testing.B) {
	dir := b.TempDir()
	spec := Spec{Clusters: 1000, Apps: agentBenchFetchApps}
	if err := Generate(dir, spec); err != nil {
		b.Fatal(err)
	}
	took := agentBenchRender(b, dir)
	cluster := ClusterName(0)
	sliceBytes, sliceFiles := dirSize(b, filepath.Join(dir, filepath.FromSlash(slice.ClusterDir(cluster))))
	repoBytes, repoFiles := dirSize(b, dir)
	b.Logf("fleet repo: %d clusters × %d apps rendered in %s: %d files, %d KiB; %s's slice: %d files, %d KiB",
		spec.Clusters, spec.Apps, took.Round(time.Millisecond), repoFiles, repoBytes>>10, cluster, sliceFiles, sliceBytes>>10)

	srv := gitserver.Start(b, gitserver.ForgeConfig())
	url := srv.MustCreateRepo(b, "fleet", dir)
	tree := agentBenchTree(b, dir)
	user := gitserver.AgentUser(cluster)
	if err := srv.AddUser(user, "bench-secret", gitserver.AgentRule(cluster)); err != nil {
		b.Fatal(err)
	}
	cache := b.TempDir()
	src := &gitrepo.Source{URL: url, Branch: "main", Auth: gitrepo.Auth{Username: user, Password: "bench-secret"}, CacheDir: cache, Timeout: time.Minute}
	ctx := context.Background()

	b.ResetTimer()
	before := srv.Stats("fleet")
	start := time.Now()
	res, err := src.Sync(ctx)
	if err != nil {
		b.Fatal(err)
	}
	coldTook := time.Since(start)
	cold := srv.Stats("fleet").Sub(before)
	checkoutBytes, checkoutFiles := dirSize(b, res.Dir)
	b.StopTimer()

	// One application changes (app-01: an image on every cloud cluster).
	changeAppImage(b, dir)
	agentBenchRender(b, dir)
	_, _, changed := agentBenchPush(b, srv, "fleet", dir, tree, "app-01: nginx 1.28")

	b.StartTimer()
	before = srv.Stats("fleet")
	start = time.Now()
	if _, err := src.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	incrTook := time.Since(start)
	incr := srv.Stats("fleet").Sub(before)
	before = srv.Stats("fleet")
	if _, err := src.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	poll := srv.Stats("fleet").Sub(before)
	b.StopTimer()

	b.Logf("cold fetch: %d KiB in %s (pack %d KiB), checkout %d files, %d KiB on disk", cold.BytesSent>>10, coldTook.Round(time.Millisecond), cold.UploadPackBytesSent>>10, checkoutFiles, checkoutBytes>>10)
	b.Logf("incremental fetch after a one-app commit (%d files changed): %d KiB in %s (pack %d KiB)", changed, incr.BytesSent>>10, incrTook.Round(time.Millisecond), incr.UploadPackBytesSent>>10)
	b.Logf("poll with no new commit: %d bytes (ls-remote), %d packs", poll.BytesSent, poll.UploadPacks)
	b.Logf("ratios to the agent's own slice (%d KiB): cold %.1f×, incremental %.2f×", sliceBytes>>10,
		float64(cold.BytesSent)/float64(sliceBytes), float64(incr.BytesSent)/float64(sliceBytes))
	b.ReportMetric(float64(cold.BytesSent)/1024, "KiB-cold-fetch")
	b.ReportMetric(float64(incr.BytesSent)/1024, "KiB-incremental-fetch")
	b.ReportMetric(float64(poll.BytesSent), "B-poll")
	b.ReportMetric(float64(sliceBytes)/1024, "KiB-own-slice")
	b.ReportMetric(float64(checkoutBytes)/1024, "KiB-checkout")
}

// dirSize sums the sizes of the regular files under dir.
func dirSize(b *testing.B, dir string) (int64, int) {
	b.Helper()
	var size int64
	var files int
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			size += fi.Size()
			files++
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return size, files
}
