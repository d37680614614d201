package fleetrender_test

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
)

func unitHashes(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, co := range compileRepo(t, root, fleetrender.Options{}).Clusters {
		for _, u := range co.Slice.Units {
			out[co.Slice.Cluster+"/"+u.Name] = u.Hash
		}
	}
	return out
}

func changedUnits(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestUnitHashCoversInputs: a unit's hash changes exactly when something
// its render reads changes — its source, a kustomize base outside the
// application directory, its chart — and not for unrelated files.
func TestUnitHashCoversInputs(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", "dependencies.txtar"))
	edit := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		file, content string
		want          []string
	}{
		{"README.md", "unrelated\n", nil},
		{"bases/web/configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web2\n", []string{"one/web"}},
		{"bases/web/new-file.txt", "a file the base does not list is still in its tree\n", []string{"one/web"}},
		{"apps/db/m/configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db2\n", []string{"one/db"}},
		{"apps/db/NOTES.md", "beside the source, in the application directory\n", []string{"one/db"}},
	}
	before := unitHashes(t, root)
	for _, s := range steps {
		edit(s.file, s.content)
		after := unitHashes(t, root)
		if got := changedUnits(before, after); !reflect.DeepEqual(got, s.want) {
			t.Errorf("after editing %s, changed units = %v, want %v", s.file, got, s.want)
		}
		before = after
	}

	// Helm: the chart directory is an input.
	root = writeArchive(t, filepath.Join("testdata", "fixtures", "helm-values.txtar"))
	before = unitHashes(t, root)
	p := filepath.Join(root, "apps", "api", "chart", "templates", "extra.yaml")
	if err := os.WriteFile(p, []byte("# nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := changedUnits(before, unitHashes(t, root)); !reflect.DeepEqual(got, []string{"eu-1/api", "us-1/api"}) {
		t.Errorf("after a chart change, changed units = %v", got)
	}
	// app.yaml alone is not an input: editing a comment changes nothing.
	before = unitHashes(t, root)
	app := filepath.Join(root, "apps", "api", "app.yaml")
	data, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(app, append(data, []byte("# a comment\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := changedUnits(before, unitHashes(t, root)); len(got) != 0 {
		t.Errorf("after an app.yaml comment, changed units = %v", got)
	}
}

// TestUnitHashPlainKustomizeSource: a kustomize source without a
// kustomization file (pkg/render generates Flux's) is hashed whole, and
// what a kustomization nested in it references outside it is an input too.
func TestUnitHashPlainKustomizeSource(t *testing.T) {
	root := t.TempDir()
	edit := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cm := func(name string) string { return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" }
	edit("clusters/one.yaml", "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: one\n")
	edit("apps/plain/app.yaml", "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: plain\nspec:\n  source:\n    kustomize:\n      path: src\n  syncPolicies:\n    - destination:\n        clusters: [one]\n")
	edit("apps/plain/src/cm.yaml", cm("plain"))
	edit("apps/plain/src/nested/kustomization.yaml", "resources: [../../../../bases/shared]\n")
	edit("bases/shared/kustomization.yaml", "resources: [cm.yaml]\n")
	edit("bases/shared/cm.yaml", cm("shared"))
	edit("bases/unused/cm.yaml", cm("unused"))

	steps := []struct {
		file, content string
		want          []string
	}{
		{"bases/unused/cm.yaml", cm("unused2"), nil},
		{"apps/plain/src/deeper/new.yaml", cm("new"), []string{"one/plain"}},
		{"bases/shared/cm.yaml", cm("shared2"), []string{"one/plain"}},
	}
	before := unitHashes(t, root)
	for _, s := range steps {
		edit(s.file, s.content)
		after := unitHashes(t, root)
		if got := changedUnits(before, after); !reflect.DeepEqual(got, s.want) {
			t.Errorf("after editing %s, changed units = %v, want %v", s.file, got, s.want)
		}
		before = after
	}
}
