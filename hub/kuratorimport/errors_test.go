package kuratorimport

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

const testFleet = `apiVersion: cluster.kurator.dev/v1alpha1
kind: AttachedCluster
metadata: {name: c1, namespace: default}
spec: {kubeconfig: {name: c1, key: config}}
---
apiVersion: fleet.kurator.dev/v1alpha1
kind: Fleet
metadata: {name: f, namespace: default}
spec:
  clusters: [{name: c1, kind: AttachedCluster}]
`

// TestConvertErrors: bad input is refused with the file, line, field and
// class of the problem, and no result.
func TestConvertErrors(t *testing.T) {
	cases := []struct {
		name  string
		input string
		line  int
		field string
		class error
		want  string
	}{
		{"not YAML", "apiVersion: fleet.kurator.dev/v1alpha1\nkind: [Fleet\n", 2, "", fleet.ErrSyntax, "did not find expected"},
		{"not a mapping", "- a\n- b\n", 1, "", fleet.ErrSyntax, "not a list"},
		{"no kind", "apiVersion: fleet.kurator.dev/v1alpha1\nmetadata: {name: x}\n", 1, "kind", fleet.ErrRequired, "apiVersion and kind"},
		{"unknown kind", "apiVersion: apps.kurator.dev/v1alpha1\nkind: Backup\nmetadata: {name: x}\n", 2, "kind", ErrUnknownKind, "apps.kurator.dev/v1alpha1 Backup"},
		{"other API group", "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n", 2, "kind", ErrUnknownKind, "v1 Secret"},
		{"missing name", "apiVersion: fleet.kurator.dev/v1alpha1\nkind: Fleet\nmetadata:\n  namespace: default\n", 3, "metadata.name", fleet.ErrRequired, "every Fleet needs a name"},
		{"wrong type", "apiVersion: fleet.kurator.dev/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  clusters: c1\n", 5, "spec.clusters", fleet.ErrInvalidValue, "str `c1` where a list is expected"},
		{"duplicate", testFleet + "---\n" + testFleet[:strings.Index(testFleet, "---")], 14, "metadata.name", fleet.ErrDuplicate, "also defined at input.yaml:1"},
		{"dangling member", "apiVersion: fleet.kurator.dev/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec:\n  clusters:\n  - {name: gone, kind: AttachedCluster}\n", 6, "spec.clusters[0].name", fleet.ErrDanglingReference, "no AttachedCluster default/gone among the inputs"},
		{"same name two kinds", testFleet + "---\napiVersion: cluster.kurator.dev/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\n", 14, "metadata.name", fleet.ErrDuplicate, `becomes Flotilla name "c1"`},
		{"name not a DNS label", "apiVersion: cluster.kurator.dev/v1alpha1\nkind: AttachedCluster\nmetadata: {name: my.cluster}\n", 3, "metadata.name", fleet.ErrInvalidValue, `Flotilla name "my.cluster"`},
		{"dangling fleet", testFleet + `---
apiVersion: apps.kurator.dev/v1alpha1
kind: Application
metadata: {name: a}
spec:
  source: {helmRepository: {url: "https://charts.example.com"}}
  syncPolicies:
  - destination: {fleet: other}
    helm: {chart: {spec: {chart: x}}}
`, 18, "spec.syncPolicies[0].destination.fleet", fleet.ErrDanglingReference, "no Fleet default/other"},
		{"kustomization and helm", testFleet + `---
apiVersion: apps.kurator.dev/v1alpha1
kind: Application
metadata: {name: a}
spec:
  source: {gitRepository: {url: "https://git.example.com/a"}}
  syncPolicies:
  - destination: {fleet: f}
    kustomization: {path: ./}
    helm: {chart: {spec: {chart: x}}}
`, 18, "spec.syncPolicies[0]", fleet.ErrInvalidValue, "exactly one of kustomization or helm"},
		{"OCI repository without oci://", testFleet + `---
apiVersion: apps.kurator.dev/v1alpha1
kind: Application
metadata: {name: a}
spec:
  source: {helmRepository: {type: oci, url: "https://registry.example.com/charts"}}
  syncPolicies:
  - destination: {fleet: f}
    helm: {chart: {spec: {chart: x}}}
`, 16, "spec.source.helmRepository.url", fleet.ErrInvalidValue, "an OCI chart repository's URL starts with oci://"},
		{"kustomization of a Helm repository", testFleet + `---
apiVersion: apps.kurator.dev/v1alpha1
kind: Application
metadata: {name: a}
spec:
  source: {helmRepository: {url: "https://charts.example.com"}}
  syncPolicies:
  - destination: {fleet: f}
    kustomization: {path: ./}
`, 19, "spec.syncPolicies[0].kustomization", fleet.ErrInvalidValue, "needs a gitRepository source"},
		{"no destination", testFleet + `---
apiVersion: apps.kurator.dev/v1alpha1
kind: Application
metadata: {name: a}
spec:
  source: {gitRepository: {url: "https://git.example.com/a"}}
  syncPolicies:
  - kustomization: {path: ./}
`, 18, "spec.syncPolicies[0].destination.fleet", fleet.ErrRequired, "the fleet this policy deploys to"},
		{"bad timeout", testFleet + `---
apiVersion: apps.kurator.dev/v1alpha1
kind: Application
metadata: {name: a}
spec:
  source: {gitRepository: {url: "https://git.example.com/a"}}
  syncPolicies:
  - destination: {fleet: f}
    kustomization: {path: ./, timeout: soon}
`, 19, "spec.syncPolicies[0].kustomization.timeout", fleet.ErrInvalidValue, `"soon" is not a positive duration`},
		{"two sources", testFleet + `---
apiVersion: apps.kurator.dev/v1alpha1
kind: Application
metadata: {name: a}
spec:
  source:
    gitRepository: {url: "https://git.example.com/a"}
    helmRepository: {url: "https://charts.example.com"}
  syncPolicies: []
`, 16, "spec.source", fleet.ErrInvalidValue, "exactly one of gitRepository"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Convert(map[string][]byte{"input.yaml": []byte(tc.input)}, []string{"input.yaml"})
			if err == nil {
				t.Fatalf("no error; files %v", res.Paths())
			}
			if res != nil {
				t.Errorf("a result with the error: %v", res.Paths())
			}
			var l fleet.ErrorList
			if !errors.As(err, &l) || len(l) == 0 {
				t.Fatalf("error %v is not a fleet.ErrorList", err)
			}
			e := l[0]
			if e.File != "input.yaml" || e.Line != tc.line || e.Field != tc.field || !errors.Is(e, tc.class) || !strings.Contains(e.Detail, tc.want) {
				t.Errorf("got %q (line %d, field %q), want input.yaml:%d field %q class %v containing %q", e, e.Line, e.Field, tc.line, tc.field, tc.class, tc.want)
			}
		})
	}
}

// TestWriteRefusesToOverwrite: an existing file stops the whole write
// unless force is set; nothing else is written.
func TestWriteRefusesToOverwrite(t *testing.T) {
	res, err := Convert(map[string][]byte{"in.yaml": []byte(testFleet)}, []string{"in.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "fleets"), 0o755); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(repo, "fleets", "f.yaml")
	if err := os.WriteFile(existing, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = Write(repo, res, false)
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "fleets/f.yaml") {
		t.Fatalf("err = %v, want ErrExists naming fleets/f.yaml", err)
	}
	if _, err := os.Stat(filepath.Join(repo, "clusters")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("clusters/ written despite the refusal: %v", err)
	}
	if data, _ := os.ReadFile(existing); string(data) != "mine\n" {
		t.Errorf("existing file changed: %q", data)
	}
	if err := Write(repo, res, true); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"fleets/f.yaml", "clusters/c1.yaml"} {
		data, err := os.ReadFile(filepath.Join(repo, p))
		if err != nil || string(data) != string(res.Files[p]) {
			t.Errorf("%s = %q, %v; want the import", p, data, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(repo, "*", ".import-*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestEmptyClusterSelectorIsTheFleet: an empty matchLabels selects the
// whole fleet, as in Kurator.
func TestEmptyClusterSelectorIsTheFleet(t *testing.T) {
	in := testFleet + `---
apiVersion: apps.kurator.dev/v1alpha1
kind: Application
metadata: {name: a}
spec:
  source: {helmRepository: {url: "https://charts.example.com"}}
  syncPolicies:
  - destination: {fleet: f, clusterSelector: {matchLabels: {}}}
    helm: {chart: {spec: {chart: x}}}
`
	res, err := Convert(map[string][]byte{"in.yaml": []byte(in)}, []string{"in.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Files["apps/a/app.yaml"]); !strings.Contains(got, "destination:\n      fleet: f\n") {
		t.Errorf("apps/a/app.yaml:\n%s", got)
	}
}

// TestOneErrorPerProblem: a Fleet with a missing member is reported once,
// not again by each Application whose clusterSelector needs its members.
func TestOneErrorPerProblem(t *testing.T) {
	in := `apiVersion: fleet.kurator.dev/v1alpha1
kind: Fleet
metadata: {name: f}
spec:
  clusters: [{name: gone}]
---
apiVersion: apps.kurator.dev/v1alpha1
kind: Application
metadata: {name: a}
spec:
  source: {helmRepository: {url: "https://charts.example.com"}}
  syncPolicies:
  - destination: {fleet: f, clusterSelector: {matchLabels: {env: dev}}}
    helm: {chart: {spec: {chart: x}}}
`
	_, err := Convert(map[string][]byte{"in.yaml": []byte(in)}, []string{"in.yaml"})
	var l fleet.ErrorList
	if !errors.As(err, &l) || len(l) != 1 || l[0].Line != 5 || !strings.Contains(l[0].Detail, "no AttachedCluster or Cluster default/gone") {
		t.Fatalf("err = %v, want one error on line 5", err)
	}
}
