package e2e_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// oneClusterFleet is a cluster labelled env=<cluster> and a fleet of that
// name selecting it, declaring namespaces (the YAML list under
// spec.namespaces, indented by four).
func oneClusterFleet(cluster, namespaces string) map[string]string {
	return map[string]string{
		"clusters/" + cluster + ".yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: ` + cluster + `
  labels:
    env: ` + cluster + `
`,
		"fleets/" + cluster + ".yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: ` + cluster + `
spec:
  selector:
    matchLabels:
      env: ` + cluster + `
  namespaces:
` + namespaces,
	}
}

// fleetApp is an application deployed to the fleet named like the
// cluster, its source of kind ("kustomize", "manifests") at path.
func fleetApp(cluster, name, ns, kind, path string) string {
	return `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: ` + name + `
spec:
  source:
    ` + kind + `:
      path: ` + path + `
  namespace: ` + ns + `
  syncPolicies:
    - name: all
      destination:
        fleet: ` + cluster + `
`
}

func ownershipDeployment(name string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
spec:
  replicas: 1
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `}
    spec:
      containers:
        - name: ` + name + `
          image: ghcr.io/stefanprodan/podinfo:6.7.0
`
}

// cycleUntil runs agent cycles until cond holds (at most n cycles).
func cycleUntil(t *testing.T, a *inprocAgent, n int, what string, cond func(*status.ClusterStatus) bool) *status.ClusterStatus {
	t.Helper()
	var st *status.ClusterStatus
	for range n {
		if st = a.cycle(); cond(st) {
			return st
		}
	}
	t.Fatalf("after %d cycles, not %s:\n%s", n, what, describeStatus(st))
	return nil
}

// appliedAt: every unit Ready at rev.
func appliedAt(rev string) func(*status.ClusterStatus) bool {
	return func(st *status.ClusterStatus) bool { return st.AppliedRevision == rev && allUnitsReady(st) }
}

// driftMetric reads flotilla_drift_corrections_total.
func driftMetric(t *testing.T, a *inprocAgent) float64 {
	t.Helper()
	v, ok := a.gauge("flotilla_drift_corrections_total")
	if !ok {
		t.Fatal("no flotilla_drift_corrections_total metric")
	}
	return v
}

// TestOwnershipAppShipsFleetNamespace: a podinfo-style application ships
// its own Namespace, which the fleet also declares. The namespaces unit
// owns it, with the fleet's labels and the application's merged; over
// three intervals nothing flaps (no drift correction, the Namespace is not
// written again); removing the application leaves the namespace and a
// second application's ConfigMap in it.
func TestOwnershipAppShipsFleetNamespace(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	const cluster, ns = "own-ns", "own-webapp"
	files := oneClusterFleet(cluster, "    - name: "+ns+"\n      labels:\n        pod-security.kubernetes.io/enforce: baseline\n        team: web\n")
	files["apps/webapp/app.yaml"] = fleetApp(cluster, "webapp", ns, "kustomize", "deploy/webapp")
	files["apps/webapp/deploy/webapp/kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - namespace.yaml\n  - deployment.yaml\n"
	files["apps/webapp/deploy/webapp/namespace.yaml"] = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n  labels:\n    team: web\n    istio-injection: enabled\n"
	files["apps/webapp/deploy/webapp/deployment.yaml"] = ownershipDeployment("podinfo")
	files["apps/sidecar/app.yaml"] = fleetApp(cluster, "sidecar", ns, "manifests", "manifests")
	files["apps/sidecar/manifests/configmap.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sidecar-settings\ndata:\n  color: blue\n"
	dir := t.TempDir()
	treefile.Write(t, dir, files)
	_, stderr, code := planCLI(t, "render", "--repo", dir)
	if code != 0 {
		t.Fatalf("flotilla render: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "note: apps/webapp/app.yaml: application webapp ships Namespace "+ns+", which fleet "+cluster+" declares") {
		t.Errorf("render prints no note of the namespace merge:\n%s", stderr)
	}

	repo := fleetrepo.New(t, newGitServer(t), "own-ns", dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	rev := repo.Head()
	cycleUntil(t, a, 10, "applied at "+rev, appliedAt(rev))

	live := &corev1.Namespace{}
	if err := k.Get(testCtx(t), client.ObjectKey{Name: ns}, live); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "team": "web", "istio-injection": "enabled", apply.LabelUnit: slice.UnitNamespaces}
	for key, v := range want {
		if live.Labels[key] != v {
			t.Errorf("Namespace %s label %s = %q, want %q (labels %v)", ns, key, live.Labels[key], v, live.Labels)
		}
	}
	inv, err := a.applier.Inventory(testCtx(t), "webapp")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range inv.Entries {
		if e.ID.GroupKind.Kind == "Namespace" {
			t.Errorf("unit webapp owns %s", e.Subject())
		}
	}

	// Three intervals: no drift correction, no write to the Namespace.
	drift := driftMetric(t, a)
	rv, uid := live.ResourceVersion, live.UID
	for i := range 3 {
		st := a.cycle()
		if !appliedAt(rev)(st) {
			t.Fatalf("cycle %d:\n%s", i, describeStatus(st))
		}
		for _, u := range st.Units {
			if u.DriftCorrections != 0 {
				t.Errorf("cycle %d: unit %s corrected drift %d times", i, u.Name, u.DriftCorrections)
			}
		}
	}
	if got := driftMetric(t, a); got != drift {
		t.Errorf("flotilla_drift_corrections_total went from %v to %v over three intervals", drift, got)
	}
	if err := k.Get(testCtx(t), client.ObjectKey{Name: ns}, live); err != nil {
		t.Fatal(err)
	}
	if live.ResourceVersion != rv {
		t.Errorf("the Namespace was written again over three intervals (resourceVersion %s → %s)", rv, live.ResourceVersion)
	}

	// The application leaves: the namespace and the other app stay.
	repo.Remove(t, "apps/webapp")
	hubRender(t, dir)
	rev2 := repo.Push(t, "remove webapp")
	cycleUntil(t, a, 10, "applied at "+rev2, appliedAt(rev2))
	if err := k.Get(testCtx(t), client.ObjectKey{Name: ns}, live); err != nil || live.UID != uid || live.DeletionTimestamp != nil {
		t.Fatalf("Namespace %s after removing webapp: %v (uid %s, was %s; deleting %v)", ns, err, live.UID, uid, live.DeletionTimestamp)
	}
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "sidecar-settings"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("sidecar's ConfigMap after removing webapp: %v", err)
	}
	if _, err := getDeployment(t, k, ns, "podinfo"); !apierrors.IsNotFound(err) {
		t.Errorf("webapp's Deployment was not pruned: %v", err)
	}
}

// TestOwnershipTwoAppsOneDeployment: two applications rendering the same
// Deployment on one cluster is an error of render, validate and plan,
// naming both units and their files; nothing is written.
func TestOwnershipTwoAppsOneDeployment(t *testing.T) {
	dir := copyTemplate(t)
	planGit(t, dir, "init", "-q", "-b", "main")
	planRenderCommit(t, dir, "base")
	// backend-v2 ships the same Deployment as backend, to the same fleet.
	treefile.Write(t, dir, map[string]string{
		"apps/backend-v2/app.yaml":                fleetApp("dev", "backend-v2", "backend", "kustomize", "base"),
		"apps/backend-v2/base/kustomization.yaml": "resources:\n  - deployment.yaml\n",
		"apps/backend-v2/base/deployment.yaml":    planReadFile(t, dir+"/apps/backend/base/deployment.yaml"),
	})
	before := treefile.Read(t, dir+"/rendered")
	const want = "Deployment.apps backend/backend is rendered by unit backend (apps/backend/app.yaml) and by unit backend-v2 (apps/backend-v2/app.yaml); an object must belong to one unit (cluster member2)"
	for _, args := range [][]string{
		{"render", "--repo", dir},
		{"validate", "--repo", dir},
		{"plan", "--repo", dir, "--base", "main"},
	} {
		_, stderr, code := planCLI(t, args...)
		if code != hubcmd.ExitError || !strings.Contains(stderr, want) || !strings.Contains(stderr, "apps/backend-v2/app.yaml") {
			t.Errorf("flotilla %s: exit %d, want %d and %q:\n%s", args[0], code, hubcmd.ExitError, want, stderr)
		}
	}
	after := treefile.Read(t, dir+"/rendered")
	if len(after) != len(before) {
		t.Errorf("rendered/ changed: %d files before, %d after", len(before), len(after))
	}
	for p, c := range before {
		if after[p] != c {
			t.Errorf("rendered/%s changed", p)
		}
	}
}

// TestOwnershipMoveBetweenUnits: a Deployment moves from one application
// to another in one commit. The agent hands it over: never deleted (same
// UID), available throughout, owned by the new unit afterwards.
func TestOwnershipMoveBetweenUnits(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	const cluster, ns = "own-mv", "own-move"
	files := oneClusterFleet(cluster, "    - name: "+ns+"\n      labels:\n        team: move\n")
	files["apps/alpha/app.yaml"] = fleetApp(cluster, "alpha", ns, "manifests", "manifests")
	files["apps/alpha/manifests/configmap.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: alpha\n"
	files["apps/alpha/manifests/deployment.yaml"] = ownershipDeployment("mover")
	files["apps/beta/app.yaml"] = fleetApp(cluster, "beta", ns, "manifests", "manifests")
	files["apps/beta/manifests/configmap.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: beta\n"
	dir := t.TempDir()
	treefile.Write(t, dir, files)
	hubRender(t, dir)
	repo := fleetrepo.New(t, newGitServer(t), "own-mv", dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	rev := repo.Head()
	cycleUntil(t, a, 10, "applied at "+rev, appliedAt(rev))
	var uid string
	waitFor(t, 2*time.Minute, "Deployment mover available", func() (bool, string) {
		d, err := getDeployment(t, k, ns, "mover")
		if err != nil {
			return false, err.Error()
		}
		uid = string(d.UID)
		return d.Status.AvailableReplicas >= 1, fmt.Sprintf("available %d", d.Status.AvailableReplicas)
	})

	// Watch the Deployment while the move is applied.
	var (
		mu       sync.Mutex
		problems []string
		polls    int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			d := &appsv1.Deployment{}
			err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "mover"}, d)
			mu.Lock()
			polls++
			switch {
			case err != nil:
				problems = append(problems, err.Error())
			case string(d.UID) != uid || d.DeletionTimestamp != nil:
				problems = append(problems, fmt.Sprintf("uid %s (was %s), deleting %v", d.UID, uid, d.DeletionTimestamp))
			case d.Status.AvailableReplicas < 1:
				problems = append(problems, "no replica available")
			}
			mu.Unlock()
		}
	})

	repo.Remove(t, "apps/alpha/manifests/deployment.yaml")
	repo.Write(t, "apps/beta/manifests/deployment.yaml", ownershipDeployment("mover"))
	hubRender(t, dir)
	rev2 := repo.Push(t, "move mover from alpha to beta")
	cycleUntil(t, a, 10, "applied at "+rev2, appliedAt(rev2))
	close(stop)
	wg.Wait()
	if polls == 0 {
		t.Fatal("the Deployment was never observed during the move")
	}
	if len(problems) > 0 {
		t.Errorf("during the move (%d polls): %s", polls, strings.Join(problems, "; "))
	}
	d, err := getDeployment(t, k, ns, "mover")
	if err != nil {
		t.Fatal(err)
	}
	if string(d.UID) != uid || d.Labels[apply.LabelUnit] != "beta" {
		t.Errorf("after the move: uid %s (was %s), unit %q, want beta", d.UID, uid, d.Labels[apply.LabelUnit])
	}
	inv, err := a.applier.Inventory(testCtx(t), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range inv.Entries {
		if e.ID.Name == "mover" {
			t.Errorf("unit alpha still lists %s", e.Subject())
		}
	}
	// Which unit the agent applied first is not fixed; either way the log
	// tells of the handover.
	logs := a.logs.String()
	if !strings.Contains(logs, "Deployment/"+ns+"/mover from unit alpha") && !strings.Contains(logs, "Deployment/"+ns+"/mover to unit beta") {
		t.Errorf("the agent's log does not tell of the handover:\n%s", logs)
	}
}

// TestOwnershipConflictStatus: a slice written by hand (render refuses
// it) where two units render one ConfigMap. The unit applied second
// reports Conflict naming the object and its owner, applies the rest, and
// nothing flaps over three intervals.
func TestOwnershipConflictStatus(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	const cluster, ns = "own-cf", "own-conflict"
	if err := c.CreateNamespace(testCtx(t), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cm := func(name, v string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\ndata:\n  v: " + v + "\n"
	}
	kust := "resources:\n  - objects.yaml\n"
	dir := t.TempDir()
	writeHandSlice(t, dir, cluster, []handUnit{
		{name: "one", files: map[string]string{"kustomization.yaml": kust, "objects.yaml": cm("shared", "one")}},
		{name: "two", dependsOn: []string{"one"}, files: map[string]string{"kustomization.yaml": kust, "objects.yaml": cm("shared", "two") + "---\n" + cm("two-own", "two")}},
	})
	repo := fleetrepo.New(t, newGitServer(t), "own-cf", dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	conflicted := func(st *status.ClusterStatus) bool {
		r := condOf(unitOrEmpty(st, "two").Conditions, status.ConditionReady)
		return unitIsReady(unitOf(st, "one")) && r != nil && r.Reason == status.ReasonConflict
	}
	st := cycleUntil(t, a, 5, "unit two in Conflict", conflicted)
	msg := condOf(unitOf(st, "two").Conditions, status.ConditionReady).Message
	if !strings.Contains(msg, "ConfigMap/"+ns+"/shared") || !strings.Contains(msg, "unit one") {
		t.Errorf("Conflict message %q does not name the object and its owner", msg)
	}
	owner := func() (string, string) {
		live := &corev1.ConfigMap{}
		if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "shared"}, live); err != nil {
			t.Fatal(err)
		}
		return live.Labels[apply.LabelUnit], live.ResourceVersion
	}
	unit, rv := owner()
	if unit != "one" {
		t.Fatalf("shared belongs to %q, want one", unit)
	}
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "two-own"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the rest of unit two was not applied: %v", err)
	}
	for i := range 3 {
		if st = a.cycle(); !conflicted(st) {
			t.Fatalf("cycle %d:\n%s", i, describeStatus(st))
		}
		if d := unitOf(st, "one").DriftCorrections; d != 0 {
			t.Errorf("cycle %d: unit one corrected drift %d times", i, d)
		}
	}
	if u, rv2 := owner(); u != "one" || rv2 != rv {
		t.Errorf("over three intervals shared went to unit %q, resourceVersion %s → %s", u, rv, rv2)
	}
}

func unitOrEmpty(st *status.ClusterStatus, name string) *status.UnitStatus {
	if u := unitOf(st, name); u != nil {
		return u
	}
	return &status.UnitStatus{}
}
