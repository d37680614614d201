package e2e_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	installOpenCRD(t, k, schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "MyResource"}, "myresources", apiextensionsv1.NamespaceScoped)
	if err := k.Create(testCtx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
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
			for _, d := range missingFrom(jsonValue(t, live.Object), jsonValue(t, w.Object), "") {
				t.Errorf("%s: %s %s/%s: %s", unit, w.GetKind(), w.GetNamespace(), w.GetName(), d)
			}
		}
		t.Logf("%s: the cluster holds all %d objects of its kustomize build, as built", unit, len(want))
	}
}

// jsonValue is v as encoding/json decodes it (numbers as float64), so that
// YAML and API server values compare.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// missingFrom lists where live lacks what want has: a field, a value, or a
// list element (lists must be as long as want's, element by element).
func missingFrom(live, want any, at string) []string {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, want an object", orRoot(at), live)}
		}
		var out []string
		for key, wv := range w {
			lv, ok := l[key]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s missing (want %v)", at, key, wv))
				continue
			}
			out = append(out, missingFrom(lv, wv, at+"."+key)...)
		}
		return out
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return []string{fmt.Sprintf("%s: %s, want %s", orRoot(at), compact(live), compact(want))}
		}
		var out []string
		for i := range w {
			out = append(out, missingFrom(l[i], w[i], fmt.Sprintf("%s[%d]", at, i))...)
		}
		return out
	default:
		if !reflect.DeepEqual(live, want) {
			return []string{fmt.Sprintf("%s: %v, want %v", orRoot(at), live, want)}
		}
		return nil
	}
}

func orRoot(at string) string {
	if at == "" {
		return "."
	}
	return strings.TrimPrefix(at, ".")
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}
