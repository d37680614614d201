package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
)

// TestHelmNamespacesOnCluster: a chart's objects land where the chart put
// them, through the real agent on a live cluster, as `helm install -n`
// places them: the kube-system RoleBinding of an aggregated API server in
// kube-system (its ServiceAccount subject in the release namespace), a
// ConfigMap the values put elsewhere in that namespace, objects without one
// in the release namespace, and cluster-scoped objects without a namespace
// — a ClusterRole the chart wrote one on, a custom kind whose CRD comes
// with the chart, and one whose CRD only the cluster has (discovery). The
// unit's inventory records each object where the cluster holds it, so the
// next cycles find no drift and nothing to prune.
func TestHelmNamespacesOnCluster(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	const (
		cluster = "helm-namespaces"
		ns      = "helmns-e2e"
		other   = "helmns-e2e-other"
	)
	// The Widget CRD is the cluster's own (installed by someone else).
	installOpenCRD(t, c, schema.GroupVersionKind{Group: "e2e.flotilla.dev", Version: "v1", Kind: "Widget"}, "widgets", apiextensionsv1.ClusterScoped)

	dir := t.TempDir()
	planCopyDir(t, filepath.Join("testdata", "namespaces-chart"), filepath.Join(dir, "charts", "namespaces"))
	writeHandSlice(t, dir, cluster, []handUnit{
		{name: "ns", files: map[string]string{
			"kustomization.yaml": "resources: [ns.yaml]\n",
			"ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n---\n" +
				"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + other + "\n",
		}},
		{name: "app", kind: slice.UnitHelm, namespace: ns, wait: true, dependsOn: []string{"ns"},
			helm:  &slice.HelmRelease{Chart: "charts/namespaces", ReleaseName: "app"},
			files: map[string]string{"values.yaml": "otherNamespace: " + other + "\n"}},
	})
	repo := fleetrepo.New(t, agentGit(t), cluster, dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	a.start()
	st := a.waitApplied(3*time.Minute, repo.Head())
	t.Logf("applied:\n%s", describeStatus(st))

	var rb rbacv1.RoleBinding
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: "kube-system", Name: "app-auth-reader"}, &rb); err != nil {
		t.Fatalf("the chart's kube-system RoleBinding: %v", err)
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Namespace != ns {
		t.Errorf("RoleBinding subjects = %+v, want the ServiceAccount in %s", rb.Subjects, ns)
	}
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "app-auth-reader"}, &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("a RoleBinding moved into the release namespace: %v", err)
	}
	for _, key := range []client.ObjectKey{{Namespace: other, Name: "app-elsewhere"}, {Namespace: ns, Name: "app-here"}} {
		if err := k.Get(testCtx(t), key, &corev1.ConfigMap{}); err != nil {
			t.Errorf("ConfigMap %s: %v", key, err)
		}
	}
	if err := k.Get(testCtx(t), client.ObjectKey{Name: "app-reader"}, &rbacv1.ClusterRole{}); err != nil {
		t.Errorf("ClusterRole: %v", err)
	}
	for _, kind := range []string{"Gizmo", "Widget"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "e2e.flotilla.dev", Version: "v1", Kind: kind})
		name := "app-" + map[string]string{"Gizmo": "gizmo", "Widget": "widget"}[kind]
		if err := k.Get(testCtx(t), client.ObjectKey{Name: name}, u); err != nil {
			t.Errorf("cluster-scoped %s: %v", kind, err)
		}
	}

	// The inventory names every object where the cluster holds it.
	inv, err := a.applier.Inventory(testCtx(t), "app")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"RoleBinding/app-auth-reader":                      "kube-system",
		"ConfigMap/app-elsewhere":                          other,
		"ConfigMap/app-here":                               ns,
		"ServiceAccount/app":                               ns,
		"ClusterRole/app-reader":                           "",
		"Gizmo/app-gizmo":                                  "",
		"Widget/app-widget":                                "",
		"CustomResourceDefinition/gizmos.e2e.flotilla.dev": "",
	}
	got := map[string]string{}
	for _, e := range inv.Entries {
		got[e.ID.GroupKind.Kind+"/"+e.ID.Name] = e.ID.Namespace
	}
	for key, wantNS := range want {
		if gotNS, ok := got[key]; !ok || gotNS != wantNS {
			t.Errorf("inventory %s: namespace %q (present %v), want %q", key, gotNS, ok, wantNS)
		}
	}

	// A later cycle finds the objects where it put them: no drift
	// corrected, nothing pruned, the unit still Ready.
	a.stop()
	st = a.cycle()
	if !allUnitsReady(st) {
		t.Errorf("not Ready on the next cycle:\n%s", describeStatus(st))
	}
	for _, u := range st.Units {
		if u.Name == "app" && (u.DriftCorrections > 0 || u.Objects != len(want)) {
			t.Errorf("unit app on the next cycle: %d drift corrections, %d objects (want 0 and %d)", u.DriftCorrections, u.Objects, len(want))
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
