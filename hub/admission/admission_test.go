package admission_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/hub/admission"
	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/test/golden"
)

// loadPolicy loads a repo of one cluster (at kubeVersion) and the policy
// file policies/<name>.yaml, and returns the policy and the cluster.
func loadPolicy(t *testing.T, kubeVersion, name, policy string) (*fleet.FleetPolicy, []*fleet.Cluster) {
	t.Helper()
	root := t.TempDir()
	cluster := "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: member1\n  labels: {env: production}\n"
	if kubeVersion != "" {
		cluster += "spec:\n  kubernetesVersion: " + kubeVersion + "\n"
	}
	files := map[string]string{
		"clusters/member1.yaml":      cluster,
		"policies/" + name + ".yaml": policy,
	}
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo, err := fleet.Load(context.Background(), root)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(repo.FleetPolicies) != 1 {
		t.Fatalf("%d policies loaded", len(repo.FleetPolicies))
	}
	return repo.FleetPolicies[0], repo.Clusters
}

func policyDoc(name, spec string) string {
	return "apiVersion: flotilla.dev/v1alpha1\nkind: FleetPolicy\nmetadata:\n  name: " + name + "\nspec:\n  destination:\n    clusters: [member1]\n" + spec
}

// render returns the policy and binding as YAML documents.
func render(t *testing.T, p *fleet.FleetPolicy, clusters []*fleet.Cluster) string {
	t.Helper()
	vap, binding, err := admission.Objects(p, admission.Options{Clusters: clusters})
	if err != nil {
		t.Fatalf("objects: %v", err)
	}
	var b strings.Builder
	for i, obj := range []any{vap, binding} {
		y, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.String()
}

func TestGoldenPolicies(t *testing.T) {
	cases := map[string]string{
		"no-privileged": `  exclude:
    namespaces: [kube-system]
  rules:
    - noPrivileged: {}
`,
		"baseline": `  validationActions: [Warn, Audit]
  failurePolicy: Ignore
  match:
    namespaceSelector:
      matchLabels: {team: shop}
  exclude:
    namespaces: [kube-system, istio-system]
    names: [legacy-agent]
  rules:
    - requiredLabels:
        labels: [team, app.kubernetes.io/name]
    - allowedRegistries:
        registries: [registry.example.com, ghcr.io/acme/]
    - resourceLimitsRequired: {}
`,
		"replicas-cap": `  match:
    resourceRules:
      - apiGroups: [apps]
        apiVersions: [v1]
        operations: [CREATE, UPDATE]
        resources: [deployments]
  rules:
    - cel:
        expression: "object.spec.replicas <= 50"
        messageExpression: "'at most 50 replicas, not ' + string(object.spec.replicas)"
        reason: Invalid
    - requiredLabels:
        labels: [team]
`,
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			p, clusters := loadPolicy(t, "v1.36.3", name, policyDoc(name, spec))
			golden.Assert(t, filepath.Join("testdata", "golden", name+".yaml"), render(t, p, clusters))
		})
	}
}

// TestBadPolicies: problems only the CEL compiler (or the generator) sees
// name the policy's file, the line and the field.
func TestBadPolicies(t *testing.T) {
	cases := []struct {
		name, kubeVersion, spec string
		line                    int
		field, want             string
		class                   error
	}{
		{
			name: "syntax", spec: "  rules:\n    - cel:\n        expression: \"object.spec.replicas <=\"\n",
			line: 10, field: "spec.rules[0].cel.expression", want: "Syntax error", class: admission.ErrCEL,
		},
		{
			name: "undeclared", spec: "  rules:\n    - noPrivileged: {}\n    - cel:\n        expression: \"objekt.spec.replicas < 5\"\n",
			line: 11, field: "spec.rules[1].cel.expression", want: "1:1: undeclared reference to 'objekt'", class: admission.ErrCEL,
		},
		{
			name: "not-bool", spec: "  rules:\n    - cel:\n        expression: \"1 + 2\"\n",
			line: 10, field: "spec.rules[0].cel.expression", want: "must evaluate to bool", class: admission.ErrCEL,
		},
		{
			name: "message-not-string", spec: "  rules:\n    - cel:\n        expression: \"true\"\n        messageExpression: \"42\"\n",
			line: 11, field: "spec.rules[0].cel.messageExpression", want: "must evaluate to string", class: admission.ErrCEL,
		},
		{
			// isSemver arrived in the 1.33 library: a 1.33 server accepts
			// new expressions at 1.32, so it refuses this one.
			name: "too-new-for-cluster", kubeVersion: "v1.33.0",
			spec: "  rules:\n    - cel:\n        expression: \"isSemver('1.2.3')\"\n",
			line: 10, field: "spec.rules[0].cel.expression", want: "undeclared reference to 'isSemver'", class: admission.ErrCEL,
		},
		{
			name: "pod-rule-on-configmaps",
			spec: "  match:\n    resourceRules:\n      - apiGroups: [\"\"]\n        apiVersions: [v1]\n        operations: [CREATE]\n        resources: [pods, configmaps]\n  rules:\n    - noPrivileged: {}\n",
			line: 13, field: "spec.match.resourceRules[0].resources[1]", want: "configmaps in API group \"\" has no pod spec", class: admission.ErrNotPodKind,
		},
		{
			name: "old-cluster", kubeVersion: "v1.29.4", spec: "  rules:\n    - noPrivileged: {}\n",
			line: 6, field: "spec.destination", want: "cluster member1 runs Kubernetes v1.29.4", class: admission.ErrClusterTooOld,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kv := tc.kubeVersion
			if kv == "" {
				kv = "v1.36.3"
			}
			p, clusters := loadPolicy(t, kv, tc.name, policyDoc(tc.name, tc.spec))
			_, _, err := admission.Objects(p, admission.Options{Clusters: clusters})
			var list fleet.ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("want one problem, got %v", err)
			}
			fe := list[0]
			if fe.File != "policies/"+tc.name+".yaml" || fe.Line != tc.line || fe.Field != tc.field || !strings.Contains(fe.Detail, tc.want) {
				t.Errorf("got %s\nwant policies/%s.yaml:%d: %s: …%s…", fe, tc.name, tc.line, tc.field, tc.want)
			}
			if !errors.Is(err, fleet.ErrInvalidValue) || !errors.Is(err, tc.class) {
				t.Errorf("%v: not classified as invalid value and %v", err, tc.class)
			}
		})
	}
}

// TestCompatibilityVersion: the same expression compiles for a cluster
// whose previous minor release knows the function.
func TestCompatibilityVersion(t *testing.T) {
	spec := "  rules:\n    - cel:\n        expression: \"isSemver('1.2.3')\"\n"
	p, clusters := loadPolicy(t, "v1.34.1", "semver", policyDoc("semver", spec))
	if _, _, err := admission.Objects(p, admission.Options{Clusters: clusters}); err != nil {
		t.Errorf("v1.34 cluster: %v", err)
	}
}

// TestDocsExamples compiles the FleetPolicy examples of docs/fleet-repo.md,
// so the documented CEL stays valid.
func TestDocsExamples(t *testing.T) {
	md, err := os.ReadFile("../../docs/fleet-repo.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := regexp.MustCompile("(?s)```yaml\n# policies/([a-z0-9-]+)\\.yaml\n(apiVersion:.*?)```").FindAllSubmatch(md, -1)
	if len(examples) == 0 {
		t.Fatal("no FleetPolicy example in docs/fleet-repo.md")
	}
	for _, m := range examples {
		name := string(m[1])
		// Point the example at the test repo's single cluster.
		doc := regexp.MustCompile(`(?m)^  destination:\n    \w+: .*\n`).ReplaceAllString(string(m[2]), "  destination:\n    clusters: [member1]\n")
		p, clusters := loadPolicy(t, "v1.36.3", name, doc)
		if _, _, err := admission.Objects(p, admission.Options{Clusters: clusters}); err != nil {
			t.Errorf("docs example %s: %v", name, err)
		}
	}
}
