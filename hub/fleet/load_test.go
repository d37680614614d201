package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// baseRepo is a minimal valid repo; cases change or add one file each.
func baseRepo() map[string]string {
	return map[string]string{
		"clusters/member1.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: member1
  labels: {env: prod, region: eu}
`,
		"clusters/member2.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: member2
  labels: {env: prod, region: us}
`,
		"fleets/prod.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: prod
spec:
  clusters: [member1, member2]
`,
		"apps/web/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: web
spec:
  source:
    manifests:
      path: manifests
  syncPolicies:
    - destination:
        fleet: prod
`,
		"apps/web/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
	}
}

// writeRepo writes base with changes applied (an empty value deletes).
func writeRepo(t testing.TB, changes map[string]string) string {
	t.Helper()
	files := baseRepo()
	for k, v := range changes {
		if v == "" {
			delete(files, k)
			continue
		}
		files[k] = v
	}
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func app(spec string) string {
	return "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n" + spec
}

const manifestsSource = "  source:\n    manifests:\n      path: manifests\n"

func TestLoadBase(t *testing.T) {
	r, err := Load(context.Background(), writeRepo(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) != 0 {
		t.Fatalf("warnings: %v", r.Warnings)
	}
	if got := names(r.Resolve(Destination{Fleet: "prod"})); got != "member1,member2" {
		t.Fatalf("prod = %s", got)
	}
}

// TestLoadErrors has one case per error class (and per kind of structural
// problem), each asserting the exact file:line: field and the class.
func TestLoadErrors(t *testing.T) {
	bomb := "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: member1\n  annotations:\n"
	bomb += "    a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	for i, prev := 'b', 'a'; i <= 'h'; i, prev = i+1, i {
		bomb += "    " + string(i) + ": &" + string(i) + " [*" + string(prev) + strings.Repeat(", *"+string(prev), 9) + "]\n"
	}
	tests := []struct {
		name    string
		changes map[string]string
		want    string // file:line: field
		class   error
		detail  string // substring of the message
	}{
		{
			name:    "unknown field",
			changes: map[string]string{"clusters/member1.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: member1\nspec:\n  kubernetesVersion: v1.36.3\n  capcity: {cpu: 1}\n"},
			want:    "clusters/member1.yaml:7: spec.capcity",
			class:   ErrUnknownField,
		},
		{
			name:    "unknown field in a list item",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination: {fleet: prod}\n    - destination:\n        flet: prod\n")},
			want:    "apps/web/app.yaml:12: spec.syncPolicies[1].destination.flet",
			class:   ErrUnknownField,
		},
		{
			name:    "invalid age recipient",
			changes: map[string]string{"clusters/member1.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: member1\nspec:\n  sops:\n    ageRecipient: AGE-SECRET-KEY-1QQQ\n"},
			want:    "clusters/member1.yaml:7: spec.sops.ageRecipient",
			class:   ErrInvalidValue,
			detail:  "not an age recipient",
		},
		{
			name:    "invalid name",
			changes: map[string]string{"clusters/Member_3.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: Member_3\n"},
			want:    "clusters/Member_3.yaml:4: metadata.name",
			class:   ErrInvalidValue,
			detail:  "RFC 1123",
		},
		{
			name:    "wrong type",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination: {fleet: prod}\n      overrides:\n        replicas:\n          - name: web\n            count: four\n")},
			want:    "apps/web/app.yaml:14: spec.syncPolicies[0].overrides.replicas[0].count",
			class:   ErrInvalidValue,
			detail:  "expected an integer, got a string",
		},
		{
			name:    "invalid duration",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  timeout: 5x\n  syncPolicies:\n    - destination: {fleet: prod}\n")},
			want:    "apps/web/app.yaml:9: spec.timeout",
			class:   ErrInvalidValue,
			detail:  `unknown unit "x" in duration "5x"`,
		},
		{
			name:    "timeout not positive",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  timeout: 0s\n  syncPolicies:\n    - destination: {fleet: prod}\n")},
			want:    "apps/web/app.yaml:9: spec.timeout",
			class:   ErrInvalidValue,
			detail:  "must be positive",
		},
		{
			name: "health check expression does not compile",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  healthChecks:\n    - apiVersion: example.com/v1\n      kind: Widget\n" +
				"      current: status.ready == true\n      failed: status.phase ==\n  syncPolicies:\n    - destination: {fleet: prod}\n")},
			want:   "apps/web/app.yaml:13: spec.healthChecks[0].failed",
			class:  ErrInvalidValue,
			detail: "the CEL expression does not compile",
		},
		{
			name: "fleet health check without current",
			changes: map[string]string{"fleets/prod.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters: [member1, member2]\n" +
				"  healthChecks:\n    - apiVersion: example.com/v1\n      kind: Widget\n"},
			want:  "fleets/prod.yaml:8: spec.healthChecks[0].current",
			class: ErrRequired,
		},
		{
			name:    "required source",
			changes: map[string]string{"apps/web/app.yaml": app("  syncPolicies:\n    - destination: {fleet: prod}\n")},
			want:    "apps/web/app.yaml:5: spec.source",
			class:   ErrRequired,
		},
		{
			name:    "two destination kinds",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination:\n        fleet: prod\n        clusters: [member1]\n")},
			want:    "apps/web/app.yaml:10: spec.syncPolicies[0].destination",
			class:   ErrInvalidValue,
			detail:  "set it without fleet or selector",
		},
		{
			name:    "duplicate name",
			changes: map[string]string{"clusters/eu/member1.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: member1\n"},
			// clusters/eu/member1.yaml sorts before clusters/member1.yaml, so it wins.
			want:   "clusters/member1.yaml:4: metadata.name",
			class:  ErrDuplicate,
			detail: "also defined in clusters/eu/member1.yaml",
		},
		{
			name:    "dangling fleet",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination: {fleet: prod}\n    - destination:\n        fleet: staging\n")},
			want:    "apps/web/app.yaml:12: spec.syncPolicies[1].destination.fleet",
			class:   ErrDanglingReference,
			detail:  `no fleet named "staging"`,
		},
		{
			name:    "dangling fleet member",
			changes: map[string]string{"fleets/prod.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters:\n    - member1\n    - member9\n"},
			want:    "fleets/prod.yaml:8: spec.clusters[1]",
			class:   ErrDanglingReference,
		},
		{
			name: "dependency cycle",
			changes: map[string]string{
				"apps/a/app.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: a\nspec:\n  source: {manifests: {path: ../web/manifests}}\n  dependsOn: [b]\n  syncPolicies: [{destination: {fleet: prod}}]\n",
				"apps/b/app.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: b\nspec:\n  source: {manifests: {path: ../web/manifests}}\n  dependsOn: [c]\n  syncPolicies: [{destination: {fleet: prod}}]\n",
				"apps/c/app.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: c\nspec:\n  source: {manifests: {path: ../web/manifests}}\n  dependsOn:\n    - web\n    - a\n  syncPolicies: [{destination: {fleet: prod}}]\n",
			},
			want:   "apps/a/app.yaml:7: spec.dependsOn[0]",
			class:  ErrDependencyCycle,
			detail: "a → b → c → a",
		},
		{
			name:    "YAML syntax",
			changes: map[string]string{"fleets/prod.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters: [member1\n"},
			want:    "fleets/prod.yaml:6: ",
			class:   ErrSyntax,
		},
		{
			name:    "duplicate key",
			changes: map[string]string{"fleets/prod.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters: [member1]\n  clusters: [member2]\n"},
			want:    "fleets/prod.yaml:7: spec.clusters",
			class:   ErrSyntax,
			detail:  `duplicate key "clusters" (first at line 6)`,
		},
		{
			name:    "two documents",
			changes: map[string]string{"clusters/member2.yaml": baseRepo()["clusters/member2.yaml"] + "---\napiVersion: flotilla.dev/v1alpha1\n"},
			want:    "clusters/member2.yaml:6: ",
			class:   ErrSyntax,
			detail:  "more than one YAML document",
		},
		{
			name:    "alias bomb",
			changes: map[string]string{"clusters/member1.yaml": bomb},
			want:    "clusters/member1.yaml:",
			class:   ErrSyntax,
			detail:  "aliases expand to more than",
		},
		{
			name:    "file too large",
			changes: map[string]string{"clusters/member1.yaml": baseRepo()["clusters/member1.yaml"] + "# " + strings.Repeat("x", MaxFileSize) + "\n"},
			want:    "clusters/member1.yaml: ",
			class:   ErrSyntax,
			detail:  "more than the limit",
		},
		{
			name:    "wrong apiVersion",
			changes: map[string]string{"fleets/prod.yaml": strings.Replace(baseRepo()["fleets/prod.yaml"], "flotilla.dev/v1alpha1", "flotilla.dev/v1", 1)},
			want:    "fleets/prod.yaml:1: apiVersion",
			class:   ErrInvalidValue,
		},
		{
			name:    "wrong kind",
			changes: map[string]string{"clusters/member2.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: member2\n"},
			want:    "clusters/member2.yaml:2: kind",
			class:   ErrInvalidValue,
			detail:  "must be a Cluster",
		},
		{
			name:    "wrong kind, article",
			changes: map[string]string{"apps/web/app.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: web\n"},
			want:    "apps/web/app.yaml:2: kind",
			class:   ErrInvalidValue,
			detail:  "must be an Application, not",
		},
		{
			name:    "name does not match file",
			changes: map[string]string{"fleets/prod.yaml": strings.Replace(baseRepo()["fleets/prod.yaml"], "name: prod", "name: production", 1)},
			want:    "fleets/prod.yaml:4: metadata.name",
			class:   ErrInvalidValue,
		},
		{
			name:    "path leaves the repo",
			changes: map[string]string{"apps/web/app.yaml": app("  source:\n    kustomize:\n      path: ../../../etc\n  syncPolicies: [{destination: {fleet: prod}}]\n")},
			want:    "apps/web/app.yaml:8: spec.source.kustomize.path",
			class:   ErrInvalidValue,
			detail:  "leaves the repo",
		},
		{
			name:    "kustomize source without kustomization listing app.yaml",
			changes: map[string]string{"apps/web/app.yaml": app("  source:\n    kustomize:\n      path: .\n  syncPolicies: [{destination: {fleet: prod}}]\n")},
			want:    "apps/web/app.yaml:8: spec.source.kustomize.path",
			class:   ErrInvalidValue,
			detail:  "would include apps/web/app.yaml",
		},
		{
			name:    "kustomize source above the application without kustomization",
			changes: map[string]string{"apps/web/app.yaml": app("  source:\n    kustomize:\n      path: ..\n  syncPolicies: [{destination: {fleet: prod}}]\n")},
			want:    "apps/web/app.yaml:8: spec.source.kustomize.path",
			class:   ErrInvalidValue,
			detail:  "apps has no kustomization.yaml",
		},
		{
			name:    "helm version not semver",
			changes: map[string]string{"apps/web/app.yaml": app("  source:\n    helm:\n      repo: https://charts.example.com\n      chart: web\n      version: banana\n  syncPolicies: [{destination: {fleet: prod}}]\n")},
			want:    "apps/web/app.yaml:10: spec.source.helm.version",
			class:   ErrInvalidValue,
		},
		{
			name:    "helm oci repo with a tag",
			changes: map[string]string{"apps/web/app.yaml": app("  source:\n    helm:\n      repo: oci://registry.example/charts/web:1.0.0\n      chart: web\n  syncPolicies: [{destination: {fleet: prod}}]\n")},
			want:    "apps/web/app.yaml:8: spec.source.helm.repo",
			class:   ErrInvalidValue,
			detail:  "oci:// repository is host/path only",
		},
		{
			name:    "helm repo not http or oci",
			changes: map[string]string{"apps/web/app.yaml": app("  source:\n    helm:\n      repo: ftp://charts.example.com\n      chart: web\n  syncPolicies: [{destination: {fleet: prod}}]\n")},
			want:    "apps/web/app.yaml:8: spec.source.helm.repo",
			class:   ErrInvalidValue,
			detail:  "oci:// registry path",
		},
		{
			name:    "helm repo and path",
			changes: map[string]string{"apps/web/app.yaml": app("  source:\n    helm:\n      path: manifests\n      repo: https://charts.example.com\n  syncPolicies: [{destination: {fleet: prod}}]\n")},
			want:    "apps/web/app.yaml:9: spec.source.helm.repo",
			class:   ErrInvalidValue,
			detail:  "either path or repo",
		},
		{
			name:    "reserved name prefix",
			changes: map[string]string{"apps/web/app.yaml": "", "apps/flotilla-web/app.yaml": strings.Replace(baseRepo()["apps/web/app.yaml"], "name: web", "name: flotilla-web", 1), "apps/flotilla-web/manifests/cm.yaml": "{}\n"},
			want:    "apps/flotilla-web/app.yaml:4: metadata.name",
			class:   ErrInvalidValue,
			detail:  "reserved",
		},
		{
			name:    "no positive weight",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination: {fleet: prod}\n      replicaScheduling:\n        target: {name: web}\n        replicas: 4\n        weightPreference:\n          staticWeightList:\n            - targetCluster: {clusterNames: [member1]}\n              weight: 0\n")},
			want:    "apps/web/app.yaml:15: spec.syncPolicies[0].replicaScheduling.weightPreference.staticWeightList",
			class:   ErrInvalidValue,
			detail:  "at least one weight must be positive",
		},
		{
			name:    "weight for a missing cluster",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination: {fleet: prod}\n      replicaScheduling:\n        target: {name: web}\n        replicas: 4\n        weightPreference:\n          staticWeightList:\n            - targetCluster: {clusterNames: [member1]}\n              weight: 1\n            - targetCluster:\n                clusterNames:\n                  - member7\n              weight: 1\n")},
			want:    "apps/web/app.yaml:20: spec.syncPolicies[0].replicaScheduling.weightPreference.staticWeightList[1].targetCluster.clusterNames[0]",
			class:   ErrDanglingReference,
		},
		{
			name:    "same workload divided twice on one cluster",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination: {fleet: prod}\n      replicaScheduling:\n        target: {name: web}\n        replicas: 4\n        weightPreference: {staticWeightList: [{targetCluster: {clusterNames: [member1, member2]}, weight: 1}]}\n    - destination: {clusters: [member2]}\n      replicaScheduling:\n        target: {name: web}\n        replicas: 2\n        weightPreference: {staticWeightList: [{targetCluster: {clusterNames: [member2]}, weight: 1}]}\n")},
			want:    "apps/web/app.yaml:17: spec.syncPolicies[1].replicaScheduling.target",
			class:   ErrDuplicate,
			detail:  "Deployment/web on cluster member2 is already divided by spec.syncPolicies[0]",
		},
		{
			name:    "patch is not YAML",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination: {fleet: prod}\n      overrides:\n        patches:\n          - patch: |\n              kind: Deployment\n              metadata: {name: [web\n")},
			want:    "apps/web/app.yaml:13: spec.syncPolicies[0].overrides.patches[0].patch",
			class:   ErrInvalidValue,
			detail:  "does not parse as YAML: line 2 of the patch",
		},
		{
			name:    "invalid label selector",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination:\n        selector:\n          matchExpressions:\n            - {key: env, operator: Near, values: [prod]}\n")},
			want:    "apps/web/app.yaml:11: spec.syncPolicies[0].destination.selector",
			class:   ErrInvalidValue,
			detail:  "invalid label selector",
		},
		{
			name:    "invalid patch target selector",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination: {fleet: prod}\n      overrides:\n        patches:\n          - patch: '[{op: remove, path: /spec/replicas}]'\n            target:\n              labelSelector: 'app in (web'\n")},
			want:    "apps/web/app.yaml:15: spec.syncPolicies[0].overrides.patches[0].target.labelSelector",
			class:   ErrInvalidValue,
		},
		{
			name:    "unknown cluster variable",
			changes: map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination: {fleet: prod}\n      overrides:\n        values:\n          zone: ${cluster.labels.zone}\n")},
			want:    "apps/web/app.yaml:13: spec.syncPolicies[0].overrides.values.zone",
			class:   ErrInvalidValue,
			detail:  `cluster member1 has no label "zone"`,
		},
		{
			name: "global job minAvailable above replicas",
			changes: map[string]string{"jobs/train.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: GlobalJob
metadata:
  name: train
spec:
  placement:
    type: BestFit
    destination: {fleet: prod}
  template:
    minAvailable: 5
    tasks:
      - name: worker
        replicas: 4
`},
			want:   "jobs/train.yaml:10: spec.template.minAvailable",
			class:  ErrInvalidValue,
			detail: "between 0 and the job's 4 replicas",
		},
		{
			name: "global job placement type",
			changes: map[string]string{"jobs/train.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: GlobalJob
metadata:
  name: train
spec:
  placement:
    type: Spread
    destination: {fleet: prod}
  template:
    tasks: [{replicas: 1}]
`},
			want:  "jobs/train.yaml:7: spec.placement.type",
			class: ErrInvalidValue,
		},
		{
			name: "fleet namespaces differ on a shared member",
			changes: map[string]string{
				"fleets/a.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: a\nspec:\n  clusters: [member1]\n  namespaces:\n    - name: shop\n      labels: {team: a}\n",
				"fleets/b.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: b\nspec:\n  clusters: [member1]\n  namespaces:\n    - name: shop\n      labels: {team: b}\n",
			},
			want:   "fleets/b.yaml:8: spec.namespaces[0]",
			class:  ErrInvalidValue,
			detail: "differs from its declaration in fleet a",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Load(context.Background(), writeRepo(t, tc.changes))
			if err == nil {
				t.Fatalf("no error; want %s", tc.want)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, not an ErrorList: %v", err, err)
			}
			if r == nil {
				t.Fatal("nil Repo with an ErrorList")
			}
			if len(list) != 1 {
				t.Fatalf("want exactly one problem, got %d:\n%v", len(list), err)
			}
			msg := list[0].Error()
			if !strings.HasPrefix(msg, tc.want) {
				t.Errorf("message %q\ndoes not start with %q", msg, tc.want)
			}
			if !strings.Contains(msg, tc.detail) {
				t.Errorf("message %q\ndoes not contain %q", msg, tc.detail)
			}
			if !errors.Is(err, tc.class) || !errors.Is(list[0], tc.class) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.class)
			}
		})
	}
}

// TestLoadKustomizeWithoutKustomization: a kustomize source on a directory
// without a kustomization file is valid (pkg/render generates Flux's),
// also when it holds the application directory but a kustomization on the
// way down keeps app.yaml out of the generated one.
func TestLoadKustomizeWithoutKustomization(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes map[string]string
	}{
		{"plain directory", map[string]string{"apps/web/app.yaml": app("  source:\n    kustomize:\n      path: manifests\n  syncPolicies: [{destination: {fleet: prod}}]\n")}},
		{"kustomization in the application directory", map[string]string{
			"apps/web/app.yaml":           app("  source:\n    kustomize:\n      path: ..\n  syncPolicies: [{destination: {fleet: prod}}]\n"),
			"apps/web/kustomization.yaml": "resources: [manifests/cm.yaml]\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Load(context.Background(), writeRepo(t, tc.changes)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func names(cs []*Cluster) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Metadata.Name)
	}
	return strings.Join(out, ",")
}

func TestLoadWarnings(t *testing.T) {
	root := writeRepo(t, map[string]string{
		"fleets/gpu.yaml":   "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: gpu\nspec:\n  selector:\n    matchLabels: {gpu: \"true\"}\n",
		"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination:\n        selector:\n          matchLabels: {env: staging}\n    - destination: {fleet: gpu}\n"),
	})
	r, err := Load(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range r.Warnings {
		if !errors.Is(w, ErrNoMatch) {
			t.Errorf("warning %v is not ErrNoMatch", w)
		}
		got = append(got, w.Error())
	}
	want := []string{
		"apps/web/app.yaml:11: spec.syncPolicies[0].destination.selector: selector matches no cluster: the selector matches no cluster",
		"apps/web/app.yaml:13: spec.syncPolicies[1].destination.fleet: selector matches no cluster: fleet gpu has no member",
		"fleets/gpu.yaml:6: spec.selector: selector matches no cluster: the selector matches no cluster",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLoadReportsEverything checks that problems in several files come back
// in one run, sorted by file then line, and that a broken file's own error
// is not repeated as dangling references elsewhere.
func TestLoadReportsEverything(t *testing.T) {
	root := writeRepo(t, map[string]string{
		"clusters/member2.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: member2\n  labels: {env: [prod]}\n",
		"fleets/prod.yaml":      "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters: [member1, member2, member3]\n  extra: true\n",
		"apps/web/app.yaml":     app(manifestsSource + "  dependsOn: [db]\n  syncPolicies:\n    - destination: {fleet: prod}\n"),
	})
	_, err := Load(context.Background(), root)
	want := []string{
		"apps/web/app.yaml:9: spec.dependsOn[0]: reference to a missing object: no application named \"db\"",
		"clusters/member2.yaml:5: metadata.labels.env: invalid value: expected a string, got a list",
		"fleets/prod.yaml:6: spec.clusters[2]: reference to a missing object: no cluster named \"member3\"",
		"fleets/prod.yaml:7: spec.extra: unknown field: not a field of this kind",
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("got:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

func TestLoadInputFiles(t *testing.T) {
	root := writeRepo(t, map[string]string{
		"clusters/notes.txt":         "not yaml",
		"clusters/.hidden/x.yaml":    "garbage: [",
		"rendered/00/member1/a.yaml": "garbage: [",
		"charts/x/Chart.yaml":        "garbage: [",
		"apps/shared/base/x.yaml":    "garbage: [", // no app.yaml: shared sources
		"apps/README.md":             "hello",
		"clusters/edge/edge7.yml":    "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge7\n",
	})
	if err := os.Symlink("/etc/hostname", filepath.Join(root, "clusters", "member3.yaml")); err != nil {
		t.Skip("no symlinks:", err)
	}
	r, err := Load(context.Background(), root)
	want := "clusters/member3.yaml: invalid value: not a regular file (symlinks are not followed)"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if got := names(r.Clusters); got != "edge7,member1,member2" {
		t.Errorf("clusters = %s", got)
	}
}

func TestLoadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Load(ctx, writeRepo(t, nil))
	if !errors.Is(err, context.Canceled) || r != nil {
		t.Fatalf("got %v, %v", r, err)
	}
	var list ErrorList
	if errors.As(err, &list) {
		t.Fatal("cancellation reported as an input problem")
	}
	if _, err := Load(context.Background(), filepath.Join(t.TempDir(), "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing root: %v", err)
	}
}
