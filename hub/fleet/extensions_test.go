package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// goodRoute is a canary route: beta testers to v2, everyone else 90/10.
const goodRoute = `apiVersion: flotilla.dev/v1alpha1
kind: TrafficRoute
metadata:
  name: web
spec:
  destination:
    fleet: prod
  namespace: shop
  host: web
  subsets:
    - name: v1
      labels: {version: v1}
    - name: v2
      labels: {version: v2}
  http:
    - name: beta
      match:
        - headers:
            x-user-role: {exact: beta-tester}
      route:
        - subset: v2
      headers:
        request:
          set: {x-canary-version: v2}
    - name: canary
      route:
        - subset: v1
          weight: 90
        - subset: v2
          weight: 10
`

const goodPolicy = `apiVersion: flotilla.dev/v1alpha1
kind: FleetPolicy
metadata:
  name: baseline
spec:
  destination:
    fleet: prod
  validationActions: [Deny, Audit]
  exclude:
    namespaces: [kube-system]
  rules:
    - noPrivileged: {}
    - requiredLabels:
        labels: [team]
    - cel:
        expression: "object.spec.replicas <= 50"
`

// identityFleet maps shop/web on every member of prod, which declares
// the namespace shop.
const identityFleet = `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: prod
spec:
  clusters: [member1, member2]
  namespaces:
    - name: shop
  workloadIdentity:
    - namespace: shop
      serviceAccount: web
      roles:
        aws: arn:aws:iam::123456789012:role/web
        gcp: web@acme-prod.iam.gserviceaccount.com
`

func clusterWith(name, labels string) string {
	return "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + name + "\n  labels: {" + labels + "}\n"
}

func identityClusters() map[string]string {
	return map[string]string{
		"clusters/member1.yaml": clusterWith("member1", "env: prod, provider: aws"),
		"clusters/member2.yaml": clusterWith("member2", "env: prod, provider: gcp"),
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestLoadExtensions(t *testing.T) {
	root := writeRepo(t, merge(identityClusters(), map[string]string{
		"routes/web.yaml":        goodRoute,
		"policies/baseline.yaml": goodPolicy,
		"fleets/prod.yaml":       identityFleet,
	}))
	r, err := Load(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.TrafficRoutes) != 1 || len(r.FleetPolicies) != 1 {
		t.Fatalf("loaded %d routes, %d policies", len(r.TrafficRoutes), len(r.FleetPolicies))
	}
	route := r.TrafficRoutes[0]
	if w := route.Spec.HTTP[1].Route[1].Weight; w == nil || *w != 10 {
		t.Errorf("canary weight = %v", w)
	}
	if got := route.Spec.HTTP[0].Match[0].Headers["x-user-role"].Exact; got != "beta-tester" {
		t.Errorf("header match = %q", got)
	}
	// Lines are kept for problems found later, at the nearest field.
	p := r.FleetPolicies[0]
	for field, want := range map[string]int{
		"spec.rules[2].cel.expression": 16,
		"spec.rules[2].cel.message":    15, // not written: its parent
		"spec.validationActions[1]":    8,
	} {
		if got := p.Lines.Line(field); got != want {
			t.Errorf("line of %s = %d, want %d", field, got, want)
		}
	}
	f := r.Fleet("prod")
	if got := f.Lines.Line("spec.workloadIdentity[0].namespace"); got != 10 {
		t.Errorf("identity namespace line = %d", got)
	}
	if role, _ := f.Spec.WorkloadIdentity[0].RoleFor("gcp"); role != "web@acme-prod.iam.gserviceaccount.com" {
		t.Errorf("gcp role = %q", role)
	}
}

// TestBadExtensions: each problem is reported once, at its file, line and
// field, with its class.
func TestBadExtensions(t *testing.T) {
	route := func(old, new string) map[string]string {
		if !strings.Contains(goodRoute, old) {
			t.Fatalf("route lacks %q", old)
		}
		return map[string]string{"routes/web.yaml": strings.Replace(goodRoute, old, new, 1)}
	}
	policy := func(old, new string) map[string]string {
		if !strings.Contains(goodPolicy, old) {
			t.Fatalf("policy lacks %q", old)
		}
		return map[string]string{"policies/baseline.yaml": strings.Replace(goodPolicy, old, new, 1)}
	}
	identity := func(old, new string, extra ...map[string]string) map[string]string {
		if !strings.Contains(identityFleet, old) {
			t.Fatalf("fleet lacks %q", old)
		}
		return merge(append([]map[string]string{identityClusters(), {"fleets/prod.yaml": strings.Replace(identityFleet, old, new, 1)}}, extra...)...)
	}
	cases := []struct {
		name    string
		changes map[string]string
		want    string
		class   error
	}{
		{"weights not 100", route("weight: 10", "weight: 5"),
			"routes/web.yaml:26: spec.http[1].route: invalid value: the weights sum to 95; they must sum to 100", ErrInvalidValue},
		{"unknown subset", route("- subset: v2\n          weight: 10", "- subset: v3\n          weight: 10"),
			`routes/web.yaml:29: spec.http[1].route[1].subset: reference to a missing object: no subset named "v3" in spec.subsets`, ErrDanglingReference},
		{"weight missing", route("          weight: 10\n", ""),
			"routes/web.yaml:29: spec.http[1].route[1].weight: required field missing: with several destinations every one needs a weight; they sum to 100", ErrRequired},
		{"single destination weight", route("        - subset: v2\n      headers", "        - subset: v2\n          weight: 60\n      headers"),
			"routes/web.yaml:22: spec.http[0].route[0].weight: invalid value: a single destination takes all the traffic: leave the weight out or set 100", ErrInvalidValue},
		{"weight out of range", route("weight: 90", "weight: 110"),
			"routes/web.yaml:28: spec.http[1].route[0].weight: invalid value: 110 is not a percentage (0-100)", ErrInvalidValue},
		{"duplicate subset", route("      labels: {version: v2}\n", "      labels: {version: v2}\n    - name: v1\n      labels: {version: v3}\n"),
			`routes/web.yaml:15: spec.subsets[2].name: duplicate name: subset "v1" is already declared at spec.subsets[0]`, ErrDuplicate},
		{"bad regex", route("{exact: beta-tester}", "{regex: \"beta(\"}"),
			"routes/web.yaml:19: spec.http[0].match[0].headers.x-user-role.regex: invalid value: not an RE2 regular expression", ErrInvalidValue},
		{"upper-case header match", route("x-user-role:", "X-User-Role:"),
			`routes/web.yaml:19: spec.http[0].match[0].headers.X-User-Role: invalid value: header names in a match are lower case: "x-user-role"`, ErrInvalidValue},
		{"two string matches", route("{exact: beta-tester}", "{exact: a, prefix: b}"),
			"routes/web.yaml:19: spec.http[0].match[0].headers.x-user-role: invalid value: set only one of exact, prefix or regex", ErrInvalidValue},
		{"unknown field", route("  host: web\n", "  host: web\n  hostz: web\n"),
			"routes/web.yaml:10: spec.hostz: unknown field: not a field of this kind", ErrUnknownField},
		{"missing namespace", route("  namespace: shop\n", ""),
			"routes/web.yaml:5: spec.namespace: required field missing", ErrRequired},
		{"two routes for one host", merge(route("", ""), map[string]string{"routes/web2.yaml": strings.Replace(goodRoute, "name: web\n", "name: web2\n", 1)}),
			"routes/web2.yaml:9: spec.host: duplicate name: route web (routes/web.yaml) already routes host web in namespace shop on cluster member1", ErrDuplicate},
		{"missing fleet", route("fleet: prod", "fleet: staging"),
			`routes/web.yaml:7: spec.destination.fleet: reference to a missing object: no fleet named "staging"`, ErrDanglingReference},

		{"deny and warn", policy("[Deny, Audit]", "[Deny, Warn]"),
			"policies/baseline.yaml:8: spec.validationActions[1]: invalid value: Deny and Warn exclude each other", ErrInvalidValue},
		{"unknown action", policy("[Deny, Audit]", "[Deny, Block]"),
			`policies/baseline.yaml:8: spec.validationActions[1]: invalid value: "Block" is not Deny, Warn or Audit`, ErrInvalidValue},
		{"two rules in one entry", policy("    - noPrivileged: {}\n", "    - noPrivileged: {}\n      requiredLabels: {labels: [a]}\n"),
			"policies/baseline.yaml:12: spec.rules[0]: invalid value: set only one of noPrivileged", ErrInvalidValue},
		{"empty expression", policy(`expression: "object.spec.replicas <= 50"`, `expression: " "`),
			"policies/baseline.yaml:16: spec.rules[2].cel.expression: required field missing", ErrRequired},
		{"bad reason", policy(`expression: "object.spec.replicas <= 50"`, "expression: \"true\"\n        reason: Nope"),
			`policies/baseline.yaml:17: spec.rules[2].cel.reason: invalid value: "Nope" is not Unauthorized`, ErrInvalidValue},
		{"registry with scheme", policy("    - noPrivileged: {}\n", "    - allowedRegistries: {registries: [\"https://r.example.com\"]}\n"),
			`policies/baseline.yaml:12: spec.rules[0].allowedRegistries.registries[0]: invalid value: "https://r.example.com": write the registry`, ErrInvalidValue},
		{"bad label key", policy("labels: [team]", "labels: [\"te am\"]"),
			`policies/baseline.yaml:14: spec.rules[1].requiredLabels.labels[0]: invalid value: invalid label key "te am"`, ErrInvalidValue},
		{"no operations", policy("  exclude:", "  match:\n    resourceRules:\n      - {apiGroups: [apps], apiVersions: [v1], resources: [deployments]}\n  exclude:"),
			"policies/baseline.yaml:11: spec.match.resourceRules[0].operations: required field missing", ErrRequired},

		{"unknown provider", merge(identity("", ""), map[string]string{"clusters/member2.yaml": clusterWith("member2", "env: prod, provider: onprem")}),
			`clusters/member2.yaml:5: metadata.labels.provider: invalid value: "onprem" is not a workload identity provider (alibaba, aws, azure, gcp); fleet prod (fleets/prod.yaml) maps workload identities onto this cluster`, ErrInvalidValue},
		{"no provider label", merge(identity("", ""), map[string]string{"clusters/member2.yaml": clusterWith("member2", "env: prod")}),
			"fleets/prod.yaml:9: spec.workloadIdentity: invalid value: cluster member2 has no provider label", ErrInvalidValue},
		{"unknown provider key", identity("gcp: web@", "oracle: x\n        gcp: web@"),
			`fleets/prod.yaml:14: spec.workloadIdentity[0].roles.oracle: invalid value: "oracle" is not a workload identity provider`, ErrInvalidValue},
		{"role of the wrong provider", identity("      roles:\n        aws: arn:aws:iam::123456789012:role/web\n        gcp: web@acme-prod.iam.gserviceaccount.com\n", "      role: arn:aws:iam::123456789012:role/web\n"),
			`fleets/prod.yaml:12: spec.workloadIdentity[0].role: invalid value: "arn:aws:iam::123456789012:role/web" is not gcp role: want a service account email`, ErrInvalidValue},
		{"no role for provider", identity("        gcp: web@acme-prod.iam.gserviceaccount.com\n", ""),
			"fleets/prod.yaml:12: spec.workloadIdentity[0].roles: invalid value: no role for provider gcp (cluster member2)", ErrInvalidValue},
		{"malformed arn", identity("role/web", "user/web"),
			`fleets/prod.yaml:13: spec.workloadIdentity[0].roles.aws: invalid value: "arn:aws:iam::123456789012:user/web" is not aws role`, ErrInvalidValue},
		{"namespace not from a fleet", identity("    - namespace: shop\n", "    - namespace: billing\n"),
			"fleets/prod.yaml:10: spec.workloadIdentity[0].namespace: invalid value: namespace billing is not declared by any fleet of the cluster", ErrInvalidValue},
		{"two fleets, two roles", identity("", "", map[string]string{"fleets/aws.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: aws
spec:
  clusters: [member1]
  workloadIdentity:
    - namespace: shop
      serviceAccount: web
      role: arn:aws:iam::123456789012:role/other
`}),
			"fleets/prod.yaml:10: spec.workloadIdentity[0]: invalid value: ServiceAccount shop/web is mapped to another aws role by fleet aws (fleets/aws.yaml); both fleets include cluster member1", ErrInvalidValue},
		{"role and roles", identity("      roles:\n", "      role: x\n      roles:\n"),
			"fleets/prod.yaml:13: spec.workloadIdentity[0].roles: invalid value: set role or roles, not both", ErrInvalidValue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { loadsWithOneProblem(t, tc.changes, tc.want, tc.class) })
	}
}

// loadsWithOneProblem loads a repo of files and wants exactly one problem,
// starting with want, of class.
func loadsWithOneProblem(t *testing.T, files map[string]string, want string, class error) {
	t.Helper()
	_, err := Load(context.Background(), writeRepo(t, files))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("want problems, got %v", err)
	}
	var found *FieldError
	for _, e := range list {
		if strings.HasPrefix(e.Error(), want) {
			found = e
		}
	}
	if found == nil {
		t.Fatalf("no problem starting %q in:\n%v", want, err)
	}
	if !errors.Is(found, class) {
		t.Errorf("%v: class is not %v", found, class)
	}
	if len(list) != 1 {
		t.Errorf("want exactly one problem, got:\n%v", err)
	}
}
