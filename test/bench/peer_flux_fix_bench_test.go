package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// The "bad push, then fix" benchmark's unit and timings.
const (
	// fixBadImage is the bad push's image; fixGoodImage the fix's. On a
	// minimal API server (no controllers) no Deployment ever becomes
	// Available, whatever its image: the bad revision's health wait can
	// only end by its timeout or by something newer.
	fixBadImage  = "nginx:0.0.0-does-not-exist"
	fixGoodImage = peerChangeImg
	// fixWaitAtPush: the fix is pushed once the system says it waits for
	// the bad revision's health and at least this long after the bad
	// Deployment appeared (flotilla-agent says what it waits for every
	// 10 s), so every system has waited about as long when the fix comes.
	fixWaitAtPush = 15 * time.Second
	// fixFluxGate is kustomize-controller's feature gate (opt-in since
	// v1.7; in v1.9.6's internal/features) that cancels a health check
	// when a new source revision arrives.
	fixFluxGate = "CancelHealthCheckOnNewRevision"
	// fixFluxHealthMsg starts the Healthy condition's message while
	// kustomize-controller v1.9.6 runs health checks (checkHealth).
	fixFluxHealthMsg = "Running health checks for revision "
	// The agent's log line when a newer revision ends the health waits
	// (agent/reconcile/watch.go), and kustomize-controller's when the gate
	// cancels a health check.
	fixAgentEndedMsg   = "a newer revision changes this cluster's units: ending the health waits"
	fixFluxCanceledMsg = "New reconciliation triggered, canceling health checks"
)

// BenchmarkPeerFluxFix measures how long a fix takes to reach the cluster
// after a bad push, for flotilla-agent and for Flux's kustomize-controller
// without and with its CancelHealthCheckOnNewRevision gate, one after the
// other, each on a fresh minimal API server:
//
//	make bench-flux-fix
//	# or: tools/build.sh bin flux && make build &&
//	#     go test -run '^$' -bench PeerFluxFix -benchtime 1x -timeout 90m ./test/bench/
//
// One unit (Flux: one Kustomization, path apps/<unit>/manifests, wait true,
// no timeout set; Flotilla: one application, wait true, no timeout set) is
// first a ServiceAccount and a Service (healthy at once); then the bad
// push adds a Deployment, which never becomes Ready here (a minimal API
// server runs no controllers), and each system applies it and waits for
// its health; then the fix changes the Deployment's image, and the figure
// is the time from the fix's push to the live Deployment carrying the new
// image (read every 100 ms). Git is polled every second on every side, as
// in BenchmarkPeerFlux; health timeouts are each system's default
// (flotilla-agent: 5m; Flux: the Kustomization's interval, 10m as in
// BenchmarkPeerFlux, minus 30s). FLOTILLA_BENCH_PEER_FIX_TIMEOUT caps each
// phase (default 12m): a fix not applied by then is reported as "> cap".
// It writes test/results/bench-peer-flux-fix.md and is skipped unless bin/
// holds the Flux controllers.
func BenchmarkPeerFluxFix(b *testing.B) {
	ctrllog.SetLogger(logr.Discard())
	bins, err := peerFluxBinaries()
	if err != nil {
		b.Skipf("Flux controllers not built (run `tools/build.sh bin flux` or `make bench-flux-fix`): %v", err)
	}
	capAt := 12 * time.Minute
	if s := os.Getenv("FLOTILLA_BENCH_PEER_FIX_TIMEOUT"); s != "" {
		if capAt, err = time.ParseDuration(s); err != nil {
			b.Fatalf("FLOTILLA_BENCH_PEER_FIX_TIMEOUT: %v", err)
		}
	}
	fx := newFixFleet(b)
	report := fixReport{loadStart: LoadAverage(), started: time.Now(), capAt: capAt, unitTimeout: fx.unitTimeout}
	systems := []struct {
		name string
		run  func(b *testing.B) fixRun
	}{
		{"flotilla", func(b *testing.B) fixRun { return benchFixAgent(b, fx, capAt) }},
		{"flux", func(b *testing.B) fixRun { return benchFixFlux(b, bins, fx, false, capAt) }},
		{"flux-gate", func(b *testing.B) fixRun { return benchFixFlux(b, bins, fx, true, capAt) }},
	}
	for _, s := range systems {
		b.Run(s.name, func(b *testing.B) {
			b.Logf("%s (machine load %s)", s.name, LoadAverage())
			r := s.run(b)
			b.Logf("%s: fix pushed %.1f s into the health wait; fix push → fix applied %s%.2f s; %s", r.system, r.waitedAtPush.Seconds(), r.capMark(), r.fix.Seconds(), r.ended)
			b.ReportMetric(r.fix.Seconds(), "s-fix-push-to-applied")
			b.ReportMetric(r.waitedAtPush.Seconds(), "s-health-wait-at-fix-push")
			capped := 0.0
			if r.capped {
				capped = 1
			}
			b.ReportMetric(capped, "capped")
			report.runs = append(report.runs, r)
		})
	}
	report.loadEnd = LoadAverage()
	out := filepath.Join(agentproc.ModuleRoot(), "test", "results", "bench-peer-flux-fix.md")
	if err := os.WriteFile(out, []byte(report.markdown()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s", out)
}

// fixFleet is the one-unit fleet at its three commits (base, bad, fix),
// pushed to each system's own repo on one Git server.
type fixFleet struct {
	srv            *gitserver.Server
	baseDir        string
	bad, fix       string // directories holding the rendered fleet at each commit
	baseTree       map[string]string
	badTree        map[string]string
	app, namespace string
	// unitTimeout is the rendered slice's timeout of the unit (the
	// default: the application sets none).
	unitTimeout time.Duration
}

func newFixFleet(b *testing.B) *fixFleet {
	b.Helper()
	fx := &fixFleet{app: agentBenchApp(0), namespace: agentBenchNamespace(0)}
	// The application as BenchmarkPeerFlux's, with health waits on (the
	// default) and no timeout (the default).
	appYAML := fmt.Sprintf(`apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: %s
spec:
  source:
    manifests:
      path: manifests
  namespace: %s
  wait: true
  syncPolicies:
    - destination:
        clusters: [%s]
`, fx.app, fx.namespace, agentBenchCluster)
	objects := fixObjects(fx.app)
	write := func(objs string) string {
		dir := b.TempDir()
		agentBenchFleet(b, dir, 1)
		agentBenchWrite(b, dir, "apps/"+fx.app+"/app.yaml", appYAML)
		agentBenchWrite(b, dir, "apps/"+fx.app+"/manifests/objects.yaml", objs)
		agentBenchRender(b, dir)
		return dir
	}
	fx.baseDir = write(objects)
	fx.bad = write(objects + "---\n" + fixDeployment(fx.app, fixBadImage))
	fx.fix = write(objects + "---\n" + fixDeployment(fx.app, fixGoodImage))
	fx.baseTree = agentBenchTree(b, fx.baseDir)
	fx.badTree = agentBenchTree(b, fx.bad)
	s, err := slice.Read(fx.bad, agentBenchCluster)
	if err != nil {
		b.Fatal(err)
	}
	for _, u := range s.Units {
		if u.Name == fx.app {
			if !u.Wait {
				b.Fatalf("unit %s rendered with wait false", u.Name)
			}
			fx.unitTimeout = u.Timeout.Duration
		}
	}
	if fx.unitTimeout == 0 {
		b.Fatalf("unit %s not in the rendered slice", fx.app)
	}

	fx.srv = gitserver.Start(b, gitserver.ForgeConfig())
	if err := fx.srv.AddUser(gitserver.AgentUser(agentBenchCluster), "bench-secret", gitserver.AgentRule(agentBenchCluster)); err != nil {
		b.Fatal(err)
	}
	if err := fx.srv.AddUser(peerFluxUser, "bench-secret"); err != nil {
		b.Fatal(err)
	}
	return fx
}

// fixObjects are the unit's healthy objects before the bad push (a
// ServiceAccount and a Service: kstatus Current once they exist).
func fixObjects(name string) string {
	all := agentBenchObjects(name, fixGoodImage)
	docs := strings.Split(all, "---\n")
	var keep []string
	for _, d := range docs {
		if strings.Contains(d, "kind: ServiceAccount\n") || strings.Contains(d, "kind: Service\n") {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, "---\n")
}

// fixDeployment is the unit's Deployment (one replica: never Available
// without controllers).
func fixDeployment(name, image string) string {
	return strings.NewReplacer("NAME", name, "IMAGE", image).Replace(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: NAME
spec:
  replicas: 1
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
`)
}

// repo creates a system's repo at the base commit.
func (fx *fixFleet) repo(b *testing.B, name string) string {
	b.Helper()
	return fx.srv.MustCreateRepo(b, name, fx.baseDir)
}

// pushBad and pushFix commit the bad revision and then its fix to repo
// and return the commit and when it was pushed.
func (fx *fixFleet) pushBad(b *testing.B, repo string) (string, time.Time) {
	hash, _, _ := agentBenchPush(b, fx.srv, repo, fx.bad, fx.baseTree, "bad push: "+fx.app+" image "+fixBadImage)
	return hash, time.Now()
}

// applyBad pushes the bad revision and waits until its Deployment is in
// the cluster, recording how long that took in run; it returns the bad
// commit and when its Deployment was seen. logTail says what the system
// logged, should it never come.
func (fx *fixFleet) applyBad(ctx context.Context, b *testing.B, k client.Client, repo string, capAt time.Duration, run *fixRun, logTail func(int) string) (string, time.Time) {
	b.Helper()
	badHash, badPushed := fx.pushBad(b, repo)
	d, ok := fixWaitImage(ctx, k, fx.namespace, fx.app, fixBadImage, badPushed, capAt, nil)
	if !ok {
		b.Fatalf("bad Deployment not applied within %s:\n%s", capAt, logTail(20))
	}
	run.badApplied = d
	return badHash, badPushed.Add(d)
}

func (fx *fixFleet) pushFix(b *testing.B, repo string) (string, time.Time) {
	hash, _, _ := agentBenchPush(b, fx.srv, repo, fx.fix, fx.badTree, "fix: "+fx.app+" image "+fixGoodImage)
	return hash, time.Now()
}

// fixRun is what one system did.
type fixRun struct {
	system string
	flags  []string
	// timeout is the health timeout in effect, as the system states it.
	timeout string
	// badApplied: bad push → the bad Deployment in the cluster.
	badApplied time.Duration
	// waitedAtPush: the bad Deployment in the cluster → the fix pushed.
	waitedAtPush time.Duration
	// fix: fix push → the live Deployment has the fix's image (the cap
	// when capped).
	fix    time.Duration
	capped bool
	// ended says what ended the bad revision's health wait.
	ended string
}

func (r fixRun) capMark() string {
	if r.capped {
		return "> "
	}
	return ""
}

// fixWaitImage polls the unit's Deployment every 100 ms until it has image
// and returns how long that took from since; false when timeout passed
// first. every, when set, is called about once a second meanwhile.
func fixWaitImage(ctx context.Context, k client.Client, ns, name, image string, since time.Time, timeout time.Duration, every func()) (time.Duration, bool) {
	deadline := since.Add(timeout)
	for i := 0; ; i++ {
		d := &appsv1.Deployment{}
		err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)
		if err == nil && len(d.Spec.Template.Spec.Containers) > 0 && d.Spec.Template.Spec.Containers[0].Image == image {
			return time.Since(since), true
		}
		if every != nil && i%10 == 0 {
			every()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(since), false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fixTimeline records the changes of a state, with their offsets from start.
type fixTimeline struct {
	start  time.Time
	last   string
	events []string
}

func (t *fixTimeline) see(state string) {
	if state == "" || state == t.last {
		return
	}
	t.last = state
	t.events = append(t.events, fmt.Sprintf("%s at +%.1f s", state, time.Since(t.start).Seconds()))
}

func (t *fixTimeline) String() string { return strings.Join(t.events, "; ") }

func benchFixAgent(b *testing.B, fx *fixFleet, capAt time.Duration) fixRun {
	c := testenv.StartCluster(b, testenv.ClusterOptions{Mode: testenv.Minimal})
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 4*capAt)
	defer cancel()
	k := c.Client()
	if err := c.CreateNamespace(ctx, peerAgentNS); err != nil {
		b.Fatal(err)
	}
	const repo = "fix-flotilla"
	url := fx.repo(b, repo)
	args, flags := peerAgentArgs(b, c, url)
	run := fixRun{
		system:  "Flotilla (flotilla-agent)",
		timeout: fmt.Sprintf("%s (the unit's timeout in the rendered slice, the default; wait true)", fx.unitTimeout),
		flags: []string{"flotilla-agent " + strings.Join(append(flags, strings.Fields(os.Getenv("FLOTILLA_BENCH_AGENT_ARGS"))...), " ") +
			" (defaults otherwise; status committed to the fleet repo through the Git server)",
			fmt.Sprintf("Flotilla application: wait true, no timeout (slice: wait true, timeout %s)", fx.unitTimeout)},
	}

	p := startAgentProcess(b, args...)
	if cold := p.WaitCycle(0, capAt); cold["result"] != "success" {
		b.Fatalf("cold cycle at the base commit: %v\n%s", cold, p.LogTail(20))
	}

	// The bad push: applied, then waited for.
	badHash, badSeen := fx.applyBad(ctx, b, k, repo, capAt, &run, p.LogTail)
	deadline := time.Now().Add(capAt)
	for !fixAgentWaiting(p, fx.app, badHash) {
		if time.Now().After(deadline) {
			b.Fatalf("agent not waiting for %s at %s within %s:\n%s", fx.app, badHash[:8], capAt, p.LogTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Until(badSeen.Add(fixWaitAtPush)))

	// The fix.
	fixHash, fixPushed := fx.pushFix(b, repo)
	run.waitedAtPush = fixPushed.Sub(badSeen)
	fix, ok := fixWaitImage(ctx, k, fx.namespace, fx.app, fixGoodImage, fixPushed, capAt, nil)
	run.fix, run.capped = fix, !ok
	b.Logf("flotilla-agent: bad %s applied %.2f s after its push; fix %s pushed %.1f s into the health wait, applied %s%.2f s after its push",
		badHash[:8], run.badApplied.Seconds(), fixHash[:8], run.waitedAtPush.Seconds(), run.capMark(), run.fix.Seconds())

	// What ended the bad revision's wait, from the agent's log.
	var ended []string
	for _, r := range p.Records(fixAgentEndedMsg) {
		if strings.HasSuffix(fmt.Sprint(r["revision"]), fixHash) {
			ended = append(ended, fmt.Sprintf("agent log %q (changed %v)%s", fixAgentEndedMsg, r["changed"], fixLogOffset(r["time"], fixPushed)))
		}
	}
	for _, r := range p.Records("cycle finished") {
		if strings.HasSuffix(fmt.Sprint(r["revision"]), badHash) {
			ended = append(ended, fmt.Sprintf("the bad revision's cycle finished: result %v after %s%s", r["result"], recDuration(r).Round(time.Millisecond), fixLogOffset(r["time"], fixPushed)))
		}
	}
	if len(ended) == 0 {
		ended = append(ended, "no log line says the wait ended")
	}
	run.ended = strings.Join(ended, "; ")
	p.Stop(time.Minute)
	return run
}

// fixAgentWaiting: the agent logged that unit waits at revision hash.
func fixAgentWaiting(p *agentProcess, unit, hash string) bool {
	for _, r := range p.Records("unit waiting") {
		if r["unit"] == unit && strings.HasSuffix(fmt.Sprint(r["revision"]), hash) {
			return true
		}
	}
	return false
}

// fixLogOffset is a log record's time as an offset from since, if it
// parses.
func fixLogOffset(v any, since time.Time) string {
	s, _ := v.(string)
	// slog's RFC 3339; Flux's zap ISO 8601 (a zone without a colon).
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z0700"} {
		if t, err := time.Parse(layout, s); err == nil {
			return fmt.Sprintf(" (+%.1f s after the fix push)", t.Sub(since).Seconds())
		}
	}
	return ""
}

func benchFixFlux(b *testing.B, bins peerBinaries, fx *fixFleet, gate bool, capAt time.Duration) fixRun {
	c := testenv.StartCluster(b, testenv.ClusterOptions{Mode: testenv.Minimal})
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 4*capAt)
	defer cancel()
	k := preparePeerFlux(ctx, b, c, bins)
	repo := "fix-flux"
	if gate {
		repo = "fix-flux-gate"
	}
	url := fx.repo(b, repo)
	// BenchmarkPeerFlux's GitRepository and Kustomization, with health
	// checks on (wait true) and Flux's default timeout (none set).
	objs := peerFluxObjects(1, url)
	ks := objs[1]
	if err := unstructured.SetNestedField(ks.Object, true, "spec", "wait"); err != nil {
		b.Fatal(err)
	}
	unstructured.RemoveNestedField(ks.Object, "spec", "timeout")
	for _, o := range objs {
		if err := k.Create(ctx, o); err != nil {
			b.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	fluxArgs := peerFluxArgs
	if gate {
		fluxArgs = append(fluxArgs[:len(fluxArgs):len(fluxArgs)], "--feature-gates="+fixFluxGate+"=true")
	}
	storage := peerFreeAddr(b)
	env := []string{"KUBECONFIG=" + c.AdminKubeconfig(), "RUNTIME_NAMESPACE=" + peerFluxNS}
	sourceArgs := append([]string{"--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0",
		"--storage-path=" + b.TempDir(), "--storage-addr=" + storage, "--storage-adv-addr=" + storage}, peerFluxArgs...)
	kustomizeArgs := append([]string{"--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0"}, fluxArgs...)
	run := fixRun{system: "Flux kustomize-controller, without the gate", flags: []string{
		"source-controller --storage-path=<tmp> --storage-addr=<loopback> " + strings.Join(peerFluxArgs, " "),
		"kustomize-controller " + strings.Join(fluxArgs, " "),
		fmt.Sprintf("Flux objects: GitRepository interval %s; one Kustomization, interval %s, prune, wait true, no timeout set", peerPoll, peerInterval),
	}}
	if gate {
		run.system = "Flux kustomize-controller, with --feature-gates=" + fixFluxGate + "=true"
		run.flags = run.flags[1:2]
	}
	source := agentproc.Start(b, agentproc.Options{Name: repo + "-source-controller", Bin: bins.source, Args: sourceArgs, Env: env, LogTail: 40})
	kustomize := agentproc.Start(b, agentproc.Options{Name: repo + "-kustomize-controller", Bin: bins.kustomize, Args: kustomizeArgs, Env: env, LogTail: 40})
	defer source.Stop(time.Minute)
	defer kustomize.Stop(time.Minute)

	name := ks.GetName()
	head := fx.srv.Head(repo, "main")
	if _, err := peerWaitFlux(ctx, k, 1, head, time.Second, capAt); err != nil {
		b.Fatalf("Flux at the base commit: %v\n%s", err, kustomize.LogTail(20))
	}

	// The bad push: applied, then its health checked.
	badHash, badSeen := fx.applyBad(ctx, b, k, repo, capAt, &run, kustomize.LogTail)
	deadline := time.Now().Add(capAt)
	for {
		msg := fixFluxHealthChecking(ctx, k, name, badHash)
		if msg != "" {
			if _, t, ok := strings.Cut(msg, " with a timeout of "); ok {
				run.timeout = t + " (kustomize-controller's Healthy condition: \"" + msg + "\")"
			}
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("Flux not checking the health of %s within %s:\n%s", badHash[:8], capAt, kustomize.LogTail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Until(badSeen.Add(fixWaitAtPush)))

	// The fix.
	fixHash, fixPushed := fx.pushFix(b, repo)
	run.waitedAtPush = fixPushed.Sub(badSeen)
	tl := &fixTimeline{start: fixPushed}
	watch := func() { tl.see(fixFluxReady(ctx, k, name, badHash, fixHash)) }
	watch()
	fix, ok := fixWaitImage(ctx, k, fx.namespace, fx.app, fixGoodImage, fixPushed, capAt, watch)
	run.fix, run.capped = fix, !ok
	watch()
	b.Logf("%s: bad %s applied %.2f s after its push; fix %s pushed %.1f s into the health wait, applied %s%.2f s after its push; Kustomization: %s",
		repo, badHash[:8], run.badApplied.Seconds(), fixHash[:8], run.waitedAtPush.Seconds(), run.capMark(), run.fix.Seconds(), tl)
	run.ended = "Kustomization's Ready condition after the fix push: " + tl.String()
	canceled := kustomize.Records(fixFluxCanceledMsg)
	if len(canceled) > 0 || gate {
		run.ended += fmt.Sprintf("; kustomize-controller logged %q %s", fixFluxCanceledMsg, fixTimes(len(canceled)))
		if len(canceled) > 0 {
			run.ended += fixLogOffset(canceled[0]["ts"], fixPushed)
		}
	}
	// A health check that ran out: "Reconciliation failed after …" with
	// the error "health check failed after …".
	for _, r := range kustomize.Records("") {
		msg, _ := r["msg"].(string)
		e, _ := r["error"].(string)
		if strings.HasPrefix(msg, "Reconciliation failed after ") && strings.Contains(e, "health check failed") {
			if len(e) > 200 {
				e = e[:200] + "…"
			}
			run.ended += fmt.Sprintf("; kustomize-controller logged %q, error %q%s", msg, e, fixLogOffset(r["ts"], fixPushed))
		}
	}
	return run
}

// fixFluxCondition is the Kustomization's condition of type typ.
func fixFluxCondition(ctx context.Context, k client.Client, name, typ string) map[string]any {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	u.SetKind("Kustomization")
	if err := k.Get(ctx, client.ObjectKey{Namespace: peerFluxNS, Name: name}, u); err != nil {
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

// fixFluxHealthChecking is the Healthy condition's message while
// kustomize-controller checks the health of revision hash, else "".
func fixFluxHealthChecking(ctx context.Context, k client.Client, name, hash string) string {
	m := fixFluxCondition(ctx, k, name, "Healthy")
	msg, _ := m["message"].(string)
	if m["status"] == "Unknown" && strings.HasPrefix(msg, fixFluxHealthMsg) && strings.Contains(msg, hash) {
		return msg
	}
	return ""
}

// fixFluxReady is the Kustomization's state as "Ready=<status> <reason>
// (<which revision it last attempted>)", with the message when Ready is
// False.
func fixFluxReady(ctx context.Context, k client.Client, name, badHash, fixHash string) string {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
	u.SetKind("Kustomization")
	if err := k.Get(ctx, client.ObjectKey{Namespace: peerFluxNS, Name: name}, u); err != nil {
		return ""
	}
	attempted, _, _ := unstructured.NestedString(u.Object, "status", "lastAttemptedRevision")
	switch {
	case strings.HasSuffix(attempted, badHash):
		attempted = "bad revision"
	case strings.HasSuffix(attempted, fixHash):
		attempted = "fix"
	}
	m := fixFluxCondition(ctx, k, name, "Ready")
	if m == nil {
		return ""
	}
	state := fmt.Sprintf("Ready=%v %v (last attempted: %s)", m["status"], m["reason"], attempted)
	if msg, _ := m["message"].(string); m["status"] == "False" && msg != "" {
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		state += fmt.Sprintf(" %q", msg)
	}
	return state
}

func fixTimes(n int) string {
	switch n {
	case 0:
		return "never"
	case 1:
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// fixReport is BenchmarkPeerFluxFix's results file.
type fixReport struct {
	runs               []fixRun
	started            time.Time
	loadStart, loadEnd string
	capAt              time.Duration
	unitTimeout        time.Duration
}

func (p fixReport) markdown() string {
	var sb strings.Builder
	host, _ := os.Hostname()
	sb.WriteString("# A bad push, then its fix: Flux vs flotilla-agent (BenchmarkPeerFluxFix)\n\n")
	sb.WriteString("Command: `make bench-flux-fix` (= `tools/build.sh bin flux && go test -run '^$' -bench 'PeerFluxFix' -benchtime 1x -timeout 90m ./test/bench/`), raw log in `test/results/bench-peer-flux-fix.txt`.\n\n")
	fmt.Fprintf(&sb, "Run %s on %s (%d CPUs, %s/%s, %s). Machine load average (1, 5, 15 min) at start **%s**, at end **%s**: the machine was shared with other builds and tests, so timings are noisy. One run per system (`-benchtime 1x`).\n\n",
		p.started.UTC().Format(time.RFC3339), host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), p.loadStart, p.loadEnd)
	fmt.Fprintf(&sb, "Setup: each system on its own fresh minimal API server (kube-apiserver v1.36.3 + etcd from tools/, no controllers), one after the other in one run (Flotilla, Flux without the gate, Flux with it), each from its own repo on one Git smart-HTTP server (test/gitserver), polled every 1 s as in `BenchmarkPeerFlux`. "+
		"One unit (Flotilla: one application, `wait: true`, no timeout set; Flux: one Kustomization, path `apps/%s/manifests`, targetNamespace, prune, `wait: true`, no timeout set, interval %s as in `BenchmarkPeerFlux`) holds a ServiceAccount and a Service (healthy at once) at the first commit. "+
		"The bad push adds a Deployment (image `%s`, 1 replica); with no controllers it never becomes Available, so each system applies it and waits for its health until its timeout. "+
		"Once the system says it waits (flotilla-agent's \"unit waiting\" log line, every 10 s; Flux's Healthy condition \"%s…\") and at least %s after the bad Deployment appeared, the fix is pushed: the same Deployment with image `%s`. "+
		"The figure is the time from the fix's push to the live Deployment carrying the fix's image, read from the API server every 100 ms; capped at %s (FLOTILLA_BENCH_PEER_FIX_TIMEOUT), a capped figure shown as >.\n\n",
		agentBenchApp(0), peerInterval, fixBadImage, fixFluxHealthMsg, fixWaitAtPush, fixGoodImage, p.capAt)
	fmt.Fprintf(&sb, "Health timeouts, each system's default: flotilla-agent %s (an application's `timeout` default). Flux: the Kustomization's `spec.timeout` is documented as \"Defaults to 'Interval' duration\", but `GetTimeout` in kustomize-controller/api v1.9.6 returns the interval minus 30 s (at least 30 s); with the %s interval of `BenchmarkPeerFlux`'s Kustomizations (as `flux bootstrap` sets it) that is 9m30s, as the controller's own condition message says below. "+
		"The gate: `%s` is in kustomize-controller v1.9.6's `internal/features` (opt-in since v1.7, default false), passed as `--feature-gates=%s=true`.\n\n",
		p.unitTimeout, peerInterval, fixFluxGate, fixFluxGate)
	sb.WriteString("Flags:\n\n")
	for _, r := range p.runs {
		for _, f := range r.flags {
			fmt.Fprintf(&sb, "- `%s`\n", strings.TrimSpace(f))
		}
	}
	sb.WriteString("\n| system | health timeout in effect | bad push → bad Deployment applied (s) | health wait already run when the fix was pushed (s) | **fix push → fix applied (s)** |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range p.runs {
		timeout, _, _ := strings.Cut(r.timeout, " (")
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | **%s%s** |\n", r.system, timeout, peerNum(r.badApplied.Seconds()), peerNum(r.waitedAtPush.Seconds()), r.capMark(), peerNum(r.fix.Seconds()))
	}
	sb.WriteString("\nWhat ended each bad revision's health wait (from the systems' logs, and Flux's Kustomization read every second, so a state shorter than that may not show):\n\n")
	for _, r := range p.runs {
		fmt.Fprintf(&sb, "- %s: %s. Timeout: %s.\n", r.system, r.ended, r.timeout)
	}
	return sb.String()
}
