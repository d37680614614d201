package fleetrender_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/admission"
	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

const extensionsFixture = "fleet-extensions.txtar"

func filesOf(out *fleetrender.Output) map[string]string {
	m := map[string]string{}
	for _, co := range out.Clusters {
		for _, f := range co.Files {
			m[f.Path] = string(f.Data)
		}
	}
	return m
}

// TestFleetUnitsOrder: policies come first, identities and routes after
// the namespaces and policies, applications after policies and identities.
func TestFleetUnitsOrder(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", extensionsFixture))
	out := compileRepo(t, root, fleetrender.Options{})
	for _, co := range out.Clusters {
		deps := map[string]string{}
		for _, u := range co.Slice.Units {
			deps[u.Name] = strings.Join(u.DependsOn, ",")
		}
		want := map[string]string{
			slice.UnitPolicies: "",
			slice.UnitIdentity: "flotilla-namespaces,flotilla-policies",
			slice.UnitRoutes:   "flotilla-namespaces,flotilla-policies",
			"checkout":         "flotilla-identity,flotilla-namespaces,flotilla-policies",
		}
		for unit, w := range want {
			if got, ok := deps[unit]; !ok || got != w {
				t.Errorf("%s: unit %s depends on %q (present %v), want %q", co.Slice.Cluster, unit, got, ok, w)
			}
		}
		if got := unitNames(co.Slice); !strings.HasPrefix(got, "flotilla-namespaces flotilla-policies") {
			t.Errorf("%s: order %s", co.Slice.Cluster, got)
		}
	}
}

// TestCanaryStepDiff: changing only a route's weights changes only the
// weight lines of its files and the unit hashes in slice.yaml.
func TestCanaryStepDiff(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", extensionsFixture))
	before := filesOf(compileRepo(t, root, fleetrender.Options{}))
	route := filepath.Join(root, "routes", "checkout.yaml")
	data, err := os.ReadFile(route)
	if err != nil {
		t.Fatal(err)
	}
	step := strings.NewReplacer("weight: 90", "weight: 50", "weight: 10", "weight: 50").Replace(string(data))
	if err := os.WriteFile(route, []byte(step), 0o644); err != nil {
		t.Fatal(err)
	}
	after := filesOf(compileRepo(t, root, fleetrender.Options{}))
	if len(before) != len(after) {
		t.Fatalf("%d files before, %d after", len(before), len(after))
	}
	changedFiles := 0
	for path, b := range before {
		a, ok := after[path]
		if !ok {
			t.Fatalf("%s disappeared", path)
		}
		if a == b {
			continue
		}
		changedFiles++
		bl, al := strings.Split(b, "\n"), strings.Split(a, "\n")
		if len(bl) != len(al) {
			t.Errorf("%s: line count changed", path)
			continue
		}
		for i := range bl {
			if bl[i] == al[i] {
				continue
			}
			switch {
			case strings.HasSuffix(path, "/route-checkout.yaml") && strings.TrimSpace(al[i]) == "weight: 50":
			case strings.HasSuffix(path, "/slice.yaml") && strings.HasPrefix(strings.TrimSpace(al[i]), "hash: "):
			default:
				t.Errorf("%s: unexpected change %q → %q", path, bl[i], al[i])
			}
		}
	}
	// Three clusters: each one's route file and slice.yaml.
	if changedFiles != 6 {
		t.Errorf("%d files changed, want 6", changedFiles)
	}
}

// TestFleetUnitErrors: a policy whose CEL does not compile fails the
// compile (and so render and validate) with its file, line and field.
func TestFleetUnitErrors(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", extensionsFixture))
	bad := `apiVersion: flotilla.dev/v1alpha1
kind: FleetPolicy
metadata:
  name: replicas
spec:
  destination:
    fleet: production
  rules:
    - cel:
        expression: "objekt.spec.replicas <= 10"
`
	if err := os.WriteFile(filepath.Join(root, "policies", "replicas.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := fleet.Load(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []fleetrender.Options{{ValidateOnly: true}, {Charts: offlineCharts}} {
		_, err = fleetrender.Compile(context.Background(), repo, opts)
		var list fleet.ErrorList
		if !errors.As(err, &list) || len(list) != 1 {
			t.Fatalf("want one problem, got %v", err)
		}
		got := list[0].Error()
		want := "policies/replicas.yaml:10: spec.rules[0].cel.expression: invalid value: CEL expression does not compile: "
		if !strings.HasPrefix(got, want) || !errors.Is(list[0], admission.ErrCEL) {
			t.Errorf("got %s\nwant %s…", got, want)
		}
	}
}

// TestTemplateFleetUnits asserts the template's canary route, production
// policy and identity mapping on the objects agents would apply.
func TestTemplateFleetUnits(t *testing.T) {
	root := copyTree(t, templateDir)
	out := compileRepo(t, root, fleetrender.Options{})
	contains := func(cluster, unit string, want ...string) {
		t.Helper()
		got := unitObjects(t, root, out, cluster, unit)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s/%s: objects lack %q:\n%s", cluster, unit, w, got)
			}
		}
	}
	// The no-privileged policy on the production fleet: member1 and edge-1.
	for _, cl := range []string{"member1", "edge-1"} {
		contains(cl, slice.UnitPolicies, "kind: ValidatingAdmissionPolicy", "name: no-privileged",
			"kind: ValidatingAdmissionPolicyBinding", "policyName: no-privileged", "- Deny", "- kube-system")
	}
	// The canary in staging: member2 only.
	contains("member2", slice.UnitRoutes, "kind: VirtualService", "kind: DestinationRule",
		"weight: 90", "weight: 10", "exact: beta-tester", "x-canary-version: v2", "subset: v2")
	// One identity, written per provider.
	contains("member1", slice.UnitIdentity, "name: backend-api", "eks.amazonaws.com/role-arn: arn:aws:iam::123456789012:role/backend-api")
	contains("member2", slice.UnitIdentity, "iam.gke.io/gcp-service-account: backend-api@flotilla-demo.iam.gserviceaccount.com")
	contains("member1", "backend-api", "serviceAccountName: backend-api")

	units := map[string]map[string]slice.Unit{}
	for _, co := range out.Clusters {
		units[co.Slice.Cluster] = map[string]slice.Unit{}
		for _, u := range co.Slice.Units {
			units[co.Slice.Cluster][u.Name] = u
		}
	}
	for cluster, absent := range map[string][]string{
		"member1": {slice.UnitRoutes},
		"member2": {slice.UnitPolicies},
		"edge-1":  {slice.UnitRoutes, slice.UnitIdentity},
	} {
		for _, name := range absent {
			if _, ok := units[cluster][name]; ok {
				t.Errorf("%s has a %s unit", cluster, name)
			}
		}
	}
	if deps := strings.Join(units["member1"]["backend-api"].DependsOn, ","); deps != "flotilla-identity,flotilla-namespaces,flotilla-policies,mysql-db,redis-cache" {
		t.Errorf("member1 backend-api depends on %s", deps)
	}
}
