package e2e_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// heldFleet is one cluster in one fleet that declares two namespaces, with
// an application (a ConfigMap) in each.
func heldFleet(cluster string) map[string]string {
	app := func(name, ns string) (string, string) {
		return fleetApp(cluster, name, ns, "manifests", "manifests"),
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "-settings\ndata:\n  color: blue\n"
	}
	files := oneClusterFleet(cluster, "    - name: "+cluster+"-a\n    - name: "+cluster+"-b\n")
	for _, n := range []string{"a", "b"} {
		a, cm := app("app-"+n, cluster+"-"+n)
		files["apps/app-"+n+"/app.yaml"] = a
		files["apps/app-"+n+"/manifests/configmap.yaml"] = cm
	}
	return files
}

// TestEmptySliceHoldsPrune: a cluster that drops out of its only fleet gets
// an empty slice; its agent deletes nothing and reports PruneHeld with the
// units. `flotilla cluster decommission` then lets it prune them, except a
// Namespace that holds a ConfigMap Flotilla does not manage.
func TestEmptySliceHoldsPrune(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	srv := newGitServer(t)
	const cluster = "held"
	nsA, nsB := cluster+"-a", cluster+"-b"
	dir := t.TempDir()
	treefile.Write(t, dir, heldFleet(cluster))
	hubRender(t, dir)
	repo := fleetrepo.New(t, srv, "held", dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	a.start()
	defer a.stop()
	st := a.waitApplied(3*time.Minute, repo.Head())
	units := []string{slice.UnitNamespaces, "app-a", "app-b"}
	for _, u := range units {
		if unitOf(st, u) == nil {
			t.Fatalf("unit %s missing:\n%s", u, describeStatus(st))
		}
	}
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: nsB}, Data: map[string]string{"owner": "someone"}}
	if err := k.Create(testCtx(t), theirs); err != nil {
		t.Fatal(err)
	}

	// The cluster leaves its only fleet by mistake: its slice is empty.
	repo.Edit(t, "clusters/"+cluster+".yaml", "env: "+cluster, "env: elsewhere")
	hubRender(t, dir)
	if s, err := slice.Read(dir, cluster); err != nil || len(s.Units) != 0 || s.Decommission {
		t.Fatalf("slice after leaving the fleet: %+v %v", s, err)
	}
	rev2 := repo.Push(t, "leave the fleet")
	st = a.waitStatus(3*time.Minute, "PruneHeld at "+rev2, func(st *status.ClusterStatus) bool {
		return st.FetchedRevision == rev2 && status.PruneHeld(st) != ""
	})
	held := condOf(st.Conditions, status.ConditionPruneHeld)
	if held.Reason != status.ReasonAwaitingDecommission || !strings.Contains(held.Message, "3 of 3") {
		t.Errorf("PruneHeld condition: %+v", held)
	}
	for _, u := range units {
		if !strings.Contains(held.Message, u) {
			t.Errorf("PruneHeld message does not name %s: %s", u, held.Message)
		}
	}
	if st.AppliedRevision == rev2 {
		t.Errorf("applied revision %s although the prune is held", rev2)
	}
	// FlotillaPruneHeld (manifests/monitoring) alerts on this gauge.
	if v, ok := a.gauge("flotilla_prune_held"); v != 1 {
		t.Errorf("flotilla_prune_held = %v (present %v) while the prune is held, want 1", v, ok)
	}
	// Status is written after the cycle's prune step: nothing was deleted.
	for _, ns := range []string{nsA, nsB} {
		assertLive(t, k, &corev1.Namespace{}, "", ns)
	}
	assertLive(t, k, &corev1.ConfigMap{}, nsA, "app-a-settings")
	assertLive(t, k, &corev1.ConfigMap{}, nsB, "app-b-settings")

	// The deliberate command: the marker lands, the agent prunes.
	hubCLI(t, "cluster", "decommission", cluster, "--repo", dir)
	if !strings.Contains(repo.Read(t, "clusters/"+cluster+".yaml"), "decommission: true") {
		t.Fatalf("no marker:\n%s", repo.Read(t, "clusters/"+cluster+".yaml"))
	}
	hubRender(t, dir)
	if s, err := slice.Read(dir, cluster); err != nil || len(s.Units) != 0 || !s.Decommission {
		t.Fatalf("decommissioned slice: %+v %v", s, err)
	}
	rev3 := repo.Push(t, "decommission "+cluster)
	waitFor(t, 3*time.Minute, "the units pruned", func() (bool, string) {
		var left []string
		for _, u := range units {
			if inv, err := a.applier.Inventory(testCtx(t), u); err == nil && len(inv.Entries) > 0 {
				left = append(left, u)
			}
		}
		for _, key := range []client.ObjectKey{{Namespace: nsA, Name: "app-a-settings"}, {Namespace: nsB, Name: "app-b-settings"}} {
			if err := k.Get(testCtx(t), key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				left = append(left, key.String())
			}
		}
		return len(left) == 0, "left: " + strings.Join(left, ", ")
	})
	a.waitStatus(3*time.Minute, "PruneHeld cleared at "+rev3, func(st *status.ClusterStatus) bool {
		return st.FetchedRevision == rev3 && status.PruneHeld(st) == ""
	})
	if v, ok := a.gauge("flotilla_prune_held"); v != 0 || !ok {
		t.Errorf("flotilla_prune_held = %v (present %v) once the hold ended, want 0", v, ok)
	}
	// The namespace without others' objects goes; the other is kept.
	waitFor(t, 3*time.Minute, "namespace "+nsA+" deleted", func() (bool, string) {
		ns := &corev1.Namespace{}
		err := k.Get(testCtx(t), client.ObjectKey{Name: nsA}, ns)
		return apierrors.IsNotFound(err) || ns.DeletionTimestamp != nil, "still there"
	})
	assertLive(t, k, &corev1.Namespace{}, "", nsB)
	assertLive(t, k, &corev1.ConfigMap{}, nsB, "theirs")
	if !strings.Contains(a.logs.String(), "Namespace/"+nsB+" kept: it holds ConfigMap/"+nsB+"/theirs") {
		t.Errorf("the log does not say why %s was kept", nsB)
	}
}

// assertLive fails unless the object exists and is not being deleted.
func assertLive(t *testing.T, k client.Client, obj client.Object, ns, name string) {
	t.Helper()
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("%T %s/%s: %v", obj, ns, name, err)
	}
	if obj.GetDeletionTimestamp() != nil {
		t.Fatalf("%T %s/%s is being deleted", obj, ns, name)
	}
}

// hubCLI runs the hub CLI in process.
func hubCLI(t *testing.T, args ...string) string {
	t.Helper()
	root := hubcmd.NewRootCommand()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("flotilla %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}
