package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/kustomizecli"
)

// TestCustomSchemaStaysInItsUnit: one unit's kustomization sets a custom
// OpenAPI schema (kustomize's own example shape: merge keys for a custom
// kind, none for built-in kinds); another unit's Deployment gets env
// entries, a container and a volume from strategic-merge patches and a
// component, which merge by the built-in schema. The agent renders both in
// one process, the schema unit first (the other depends on it); what the
// cluster holds of each unit's objects is what `kustomize build` gives for
// that unit's tree alone: every field kustomize rendered, every list as
// long as kustomize's (the API server adds defaults, nothing else).
func TestCustomSchemaStaysInItsUnit(t *testing.T) {
	kustomizecli.Require(t)
	c := agentCluster(t)
	k := c.Client()
	const (
		cluster = "schema-isolation"
		ns      = "schema-isolation"
	)
	installOpenCRD(t, c, schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "MyResource"}, "myresources", apiextensionsv1.NamespaceScoped)
	if err := c.CreateNamespace(testCtx(t), ns); err != nil {
		t.Fatal(err)
	}

	// The trees of render's isolation test as applications' sources, each
	// unit's kustomization listing its source as the hub's do.
	trees := filepath.Join(agentproc.ModuleRoot(), "pkg", "render", "testdata", "isolation", "units")
	dir := t.TempDir()
	for _, app := range []string{"schema", "lists"} {
		planCopyDir(t, filepath.Join(trees, app), filepath.Join(dir, "apps", app))
	}
	unitFiles := func(app string) map[string]string {
		return map[string]string{"kustomization.yaml": "namespace: " + ns + "\nresources:\n- ../../../../apps/" + app + "\n"}
	}
	writeHandSlice(t, dir, cluster, []handUnit{
		{name: "schema", files: unitFiles("schema")},
		{name: "lists", files: unitFiles("lists"), dependsOn: []string{"schema"}},
	})
	repo := fleetrepo.New(t, agentGit(t), cluster, dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	a.start()
	st := a.waitApplied(3*time.Minute, repo.Head())
	t.Logf("applied:\n%s", describeStatus(st))

	for _, unit := range []string{"schema", "lists"} {
		want := kustomizecli.Build(t, filepath.Join(dir, filepath.FromSlash(slice.UnitDir(cluster, unit))))
		if len(want) == 0 {
			t.Fatalf("kustomize build of %s gave no objects", unit)
		}
		for _, w := range want {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(w.GroupVersionKind())
			if err := k.Get(testCtx(t), client.ObjectKey{Namespace: w.GetNamespace(), Name: w.GetName()}, live); err != nil {
				t.Errorf("%s: %s %s: %v", unit, w.GetKind(), w.GetName(), err)
				continue
			}
			if where := subsetOf(w.Object, live.Object, ""); where != "" {
				t.Errorf("%s: %s %s/%s: the cluster does not hold kustomize's object at %s", unit, w.GetKind(), w.GetNamespace(), w.GetName(), where)
			}
		}
		t.Logf("%s: compared the %d objects of its kustomize build with the cluster", unit, len(want))
	}
}
