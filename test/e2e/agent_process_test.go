package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// agentProc is a flotilla-agent process (test/agentproc), with e2e's
// names for what it does.
type agentProc struct {
	*agentproc.Process
	t        *testing.T
	identity string
	cacheDir string
}

// startAgentProc runs the flotilla-agent binary against cluster c with
// the admin kubeconfig; args are appended to the common ones.
func startAgentProc(t *testing.T, c *testenv.Cluster, repo *fleetrepo.Repo, cluster, namespace, identity, cacheDir, creds string, args ...string) *agentProc {
	t.Helper()
	return startAgentProcKubeconfig(t, c.AdminKubeconfig(), repo, cluster, namespace, identity, cacheDir, creds, args...)
}

// handAgentFleet sets up an agent process's test: a fleet repo on srv
// whose slice for cluster is one hand-written unit (a settings ConfigMap
// in ns, "blue"), the agent's namespace agentNS in c, and the Git
// credentials of the cluster's agent user. dir is the repo's working tree,
// for later commits.
func handAgentFleet(t *testing.T, c *testenv.Cluster, srv *gitserver.Server, cluster, ns, agentNS string) (dir string, repo *fleetrepo.Repo, creds string) {
	t.Helper()
	dir = t.TempDir()
	writeHandSlice(t, dir, cluster, []handUnit{settingsUnit(ns, "blue")})
	repo = fleetrepo.New(t, srv, cluster, dir)
	if err := c.CreateNamespace(testCtx(t), agentNS); err != nil {
		t.Fatal(err)
	}
	return dir, repo, agentUser(t, srv, cluster)
}

// startAgentProcKubeconfig is startAgentProc with the given kubeconfig.
func startAgentProcKubeconfig(t *testing.T, kubeconfig string, repo *fleetrepo.Repo, cluster, namespace, identity, cacheDir, creds string, args ...string) *agentProc {
	t.Helper()
	return startAgentProcEnv(t, nil, kubeconfig, repo, cluster, namespace, identity, cacheDir, creds, args...)
}

// startAgentProcEnv is startAgentProcKubeconfig with env added to the
// agent's environment.
func startAgentProcEnv(t *testing.T, env []string, kubeconfig string, repo *fleetrepo.Repo, cluster, namespace, identity, cacheDir, creds string, args ...string) *agentProc {
	t.Helper()
	all := append([]string{
		"--kubeconfig", kubeconfig,
		"--cluster-name", cluster, "--repo-url", repo.URL, "--git-credentials-dir", creds,
		"--cache-dir", cacheDir, "--namespace", namespace, "--identity", identity,
		"--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0",
		"--log-format", "json", "--log-level", "debug", "--shutdown-grace", "5s",
	}, args...)
	p := agentproc.Start(t, agentproc.Options{Name: identity, Args: all, CacheDir: cacheDir, Env: env})
	return &agentProc{Process: p, t: t, identity: identity, cacheDir: cacheDir}
}

func (p *agentProc) running() bool { return p.Running() }

// kill sends SIGKILL and waits for the process to end.
func (p *agentProc) kill() { p.Kill() }

// terminate sends SIGTERM and returns the exit code.
func (p *agentProc) terminate(timeout time.Duration) int { return p.Stop(timeout) }

func (p *agentProc) countLogs(msg string) int { return p.Count(msg) }

func (p *agentProc) get(server, path string) (int, string) { return p.Get(server, path) }

// metric returns the value of an unlabelled metric line ("name value").
func (p *agentProc) metric(name string) (float64, bool) { return p.Metric(name) }

func (p *agentProc) status() *status.ClusterStatus { return p.Status() }

func (p *agentProc) waitStatus(timeout time.Duration, what string, cond func(*status.ClusterStatus) bool) *status.ClusterStatus {
	p.t.Helper()
	var st *status.ClusterStatus
	waitFor(p.t, timeout, what, func() (bool, string) {
		st = p.status()
		if st == nil {
			return false, "no status file yet"
		}
		return cond(st), describeStatus(st)
	})
	return st
}

func leaseHolder(t *testing.T, k client.Client, ns, name string) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: name}, l); err != nil {
		if apierrors.IsNotFound(err) {
			return ""
		}
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestAgentLeaderElection runs two agent processes on one Lease: one
// reconciles, the other stands by (ready, not applying) and takes over
// within the lease duration when the first is killed; a SIGTERM ends the
// new leader cleanly and releases the lease.
func TestAgentLeaderElection(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	srv := agentGit(t)
	const cluster, ns, agentNS = "leader", "leader-app", "flotilla-leader"
	_, repo, creds := handAgentFleet(t, c, srv, cluster, ns, agentNS)
	const leaseDuration, retry = 4 * time.Second, time.Second
	args := []string{"--interval", "2s", "--leader-elect",
		"--leader-election-lease-duration", leaseDuration.String(), "--leader-election-renew-deadline", "3s",
		"--leader-election-retry-period", retry.String()}
	procs := map[string]*agentProc{
		"agent-a": startAgentProc(t, c, repo, cluster, agentNS, "agent-a", t.TempDir(), creds, args...),
		"agent-b": startAgentProc(t, c, repo, cluster, agentNS, "agent-b", t.TempDir(), creds, args...),
	}

	began := time.Now()
	step := func(what string) { t.Logf("%6.2fs %s", time.Since(began).Seconds(), what) }
	var leader, follower *agentProc
	waitFor(t, time.Minute, "a leader", func() (bool, string) {
		h := leaseHolder(t, k, agentNS, "flotilla-agent")
		leader = procs[h]
		return leader != nil, "holder " + h
	})
	for id, p := range procs {
		if id != leader.identity {
			follower = p
		}
	}
	step(leader.identity + " leads")
	rev := repo.Head()
	leader.waitStatus(time.Minute, "the leader to apply", func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == rev && allUnitsReady(st) && st.Agent.Identity == leader.identity
	})
	step("the leader applied")
	// The follower is ready (standing by), does not reconcile, and says so.
	if code, body := follower.get("probes", "/readyz"); code != http.StatusOK {
		t.Errorf("follower /readyz: %d %s", code, body)
	}
	if code, _ := leader.get("probes", "/readyz"); code != http.StatusOK {
		t.Errorf("leader /readyz: %d", code)
	}
	if v, ok := follower.metric("flotilla_leader"); !ok || v != 0 {
		t.Errorf("follower flotilla_leader = %v (%v)", v, ok)
	}
	if v, ok := leader.metric("flotilla_leader"); !ok || v != 1 {
		t.Errorf("leader flotilla_leader = %v (%v)", v, ok)
	}
	if n := follower.countLogs("cycle finished"); n != 0 || follower.status() != nil {
		t.Errorf("the follower reconciled (%d cycles)", n)
	}

	// The leader dies without releasing the lease; the follower takes it
	// over once it expires. How soon depends on the machine's load, so it
	// is logged, not asserted (the wait is generous).
	leader.kill()
	killed := time.Now()
	waitFor(t, 2*time.Minute, "the follower to take the lease", func() (bool, string) {
		h := leaseHolder(t, k, agentNS, "flotilla-agent")
		return h == follower.identity, "holder " + h
	})
	t.Logf("lease taken over %s after the leader was killed (lease duration %s, retry %s)",
		time.Since(killed).Round(10*time.Millisecond), leaseDuration, retry)
	follower.waitStatus(time.Minute, "the new leader to reconcile", func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == rev && allUnitsReady(st) && st.Agent.Identity == follower.identity
	})
	step("the new leader applied")
	editColor(t, k, ns, "red")
	waitColor(t, k, ns, "blue", 2*time.Minute)
	step("the new leader corrected drift")
	// Its /metrics has the loop's flotilla_* series, the drift correction
	// counted (the series is updated when the cycle ends).
	if code, _ := follower.get("probes", "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	atLeastOne := func(v float64) bool { return v >= 1 }
	exactly := func(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
	wantMetrics := map[string]func(float64) bool{
		"flotilla_drift_corrections_total":                            atLeastOne,
		`flotilla_reconcile_total{result="success"}`:                  atLeastOne,
		"flotilla_reconcile_duration_seconds_count":                   atLeastOne,
		`flotilla_git_fetch_duration_seconds_count{result="success"}`: atLeastOne,
		`flotilla_applied_revision_info{revision="` + rev + `"}`:      exactly(1),
		`flotilla_unit_ready{unit="app"}`:                             exactly(1),
		"flotilla_managed_objects":                                    exactly(2),
		`flotilla_kube_api_requests_total{type="write"}`:              atLeastOne,
	}
	waitFor(t, time.Minute, "the new leader's metrics", func() (bool, string) {
		var bad []string
		for name, ok := range wantMetrics {
			if v, found := follower.metric(name); !found || !ok(v) {
				bad = append(bad, fmt.Sprintf("%s = %v (found %v)", name, v, found))
			}
		}
		return len(bad) == 0, strings.Join(bad, "; ")
	})

	// SIGTERM: a clean exit that releases the lease.
	if code := follower.terminate(2 * time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	step("the new leader stopped")
	if h := leaseHolder(t, k, agentNS, "flotilla-agent"); h != "" {
		t.Errorf("lease still held by %q after a clean shutdown", h)
	}
}

// killUnits is a slice of a namespace unit and n app units of four objects
// each (the Flux benchmark shape, Deployments with 0 replicas).
func killUnits(ns string, n int) []handUnit {
	units := []handUnit{{name: "namespace", files: map[string]string{
		"kustomization.yaml": "resources:\n  - ns.yaml\n",
		"ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n",
	}}}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("app-%02d", i)
		units = append(units, handUnit{name: name, dependsOn: []string{"namespace"}, namespace: ns, files: map[string]string{
			"kustomization.yaml": "namespace: " + ns + "\nresources:\n  - objects.yaml\n",
			"objects.yaml":       fourObjects(name),
		}})
	}
	return units
}

func fourObjects(name string) string {
	return strings.ReplaceAll(`apiVersion: v1
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
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: NAME
data:
  unit: NAME
---
apiVersion: apps/v1
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
          image: nginx:1.27
`, "NAME", name)
}

// TestAgentKilledMidApply kills the agent process in the middle of a
// unit's apply (slowly: one worker, a low API rate; the kill comes when a
// unit has recorded its objects as pending and created some of them),
// removes that unit and a completed one from the slice, and restarts the
// agent: it converges, and nothing it ever created is left without an
// inventory entry of a unit still in the slice.
func TestAgentKilledMidApply(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	srv := agentGit(t)
	const cluster, ns, agentNS = "killme", "killme-apps", "flotilla-killme"
	const units = 30
	dir := t.TempDir()
	all := killUnits(ns, units)
	writeHandSlice(t, dir, cluster, all)
	repo := fleetrepo.New(t, srv, cluster, dir)
	if err := c.CreateNamespace(testCtx(t), agentNS); err != nil {
		t.Fatal(err)
	}
	creds := agentUser(t, srv, cluster)
	cache := t.TempDir()
	began := time.Now()
	step := func(what string) { t.Logf("%6.2fs %s", time.Since(began).Seconds(), what) }

	// At 8 requests a second, the four applies of a unit and its final
	// inventory write take over half a second: time to see the unit
	// half-applied and kill the agent there.
	slow := startAgentProc(t, c, repo, cluster, agentNS, "slow", cache, creds,
		"--interval", "2s", "--workers", "1", "--kube-api-qps", "8", "--kube-api-burst", "1")
	// inventories maps unit → whether its inventory has pending entries.
	inventories := func() map[string]bool {
		l := &corev1.ConfigMapList{}
		if err := k.List(testCtx(t), l, client.InNamespace(agentNS), client.HasLabels{"flotilla.dev/inventory-unit"}); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, cm := range l.Items {
			objs := cm.Data["objects"]
			out[cm.Labels["flotilla.dev/inventory-unit"]] = strings.HasPrefix(objs, "- ") || strings.Contains(objs, "\n- ")
		}
		return out
	}
	objectsOf := func(unit string) int {
		n := 0
		for _, u := range managedObjects(t, k, ns) {
			if u == unit {
				n++
			}
		}
		return n
	}
	var interrupted, completed string
	waitFor(t, 2*time.Minute, "a unit half-applied after some completed", func() (bool, string) {
		invs := inventories()
		var done []string
		for u, pending := range invs {
			if !pending && u != "namespace" {
				done = append(done, u)
			}
		}
		if len(done) < 3 {
			return false, fmt.Sprintf("%d units applied", len(done))
		}
		for u, pending := range invs {
			// One or two of four objects created: at least two more
			// requests to go, a quarter second at this rate.
			if !pending {
				continue
			}
			if n := objectsOf(u); n >= 1 && n <= 2 {
				slow.kill()
				interrupted, completed = u, done[0]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d units applied, none half-applied now", len(done))
	})
	step("killed while applying " + interrupted)
	invs := inventories()
	if !invs[interrupted] || objectsOf(interrupted) == 0 {
		t.Fatalf("unit %s was not interrupted mid-apply: pending entries %v, %d objects", interrupted, invs[interrupted], objectsOf(interrupted))
	}
	if len(invs) >= units+1 {
		t.Fatalf("the agent finished before it was killed; slow it down")
	}
	t.Logf("killed with %d of %d units started; %s half-applied (%d objects), %s complete", len(invs), units+1, interrupted, objectsOf(interrupted), completed)

	// The interrupted unit and a completed one leave the slice.
	var kept []handUnit
	for _, u := range all {
		if u.name == interrupted || u.name == completed {
			repo.Remove(t, slice.UnitDir(cluster, u.name))
			continue
		}
		kept = append(kept, u)
	}
	writeHandSlice(t, dir, cluster, kept)
	rev := repo.Push(t, "remove "+interrupted+" and "+completed)

	step("pushed")
	p := startAgentProc(t, c, repo, cluster, agentNS, "restarted", cache, creds, "--interval", "2s")
	st := p.waitStatus(2*time.Minute, "convergence after the restart", func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == rev && allUnitsReady(st) && len(st.Units) == len(kept)
	})

	step("converged")
	// Nothing orphaned: every managed object belongs to a unit of the
	// slice and is in that unit's inventory; every inventory entry exists.
	objs := managedObjects(t, k, ns)
	if len(objs) != 4*(len(kept)-1) {
		t.Errorf("%d managed objects in %s, want %d", len(objs), ns, 4*(len(kept)-1))
	}
	for id, unit := range objs {
		if unit == interrupted || unit == completed {
			t.Errorf("%s of unit %s, which left the slice, was not pruned", id, unit)
		}
	}
	if n := len(inventories()); n != len(kept) {
		t.Errorf("%d inventories, want %d", n, len(kept))
	}
	applier, err := apply.New(c.RESTConfig(), apply.Options{InventoryNamespace: agentNS})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range st.Units {
		chk, err := applier.Check(context.Background(), u.Name, nil)
		if err != nil || !chk.UpToDate(u.Hash, true) {
			t.Errorf("unit %s: inventory does not match the cluster: %+v %v", u.Name, chk, err)
			continue
		}
		if u.Name != "namespace" && chk.ManagedObjects != 4 {
			t.Errorf("unit %s: %d objects in its inventory", u.Name, chk.ManagedObjects)
		}
	}
	if code := p.terminate(2 * time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}
