package plan_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/plan"
)

// TestPlanShowsRealNamespaces: plan shows each object where the cluster
// will hold it: a chart's kube-system RoleBinding in kube-system, a
// cluster-scoped custom kind whose CRD another application of the fleet
// ships (unchanged by the change, so not rendered by the plan) without a
// namespace, and a kind whose scope nothing tells as namespaced, with a
// warning naming the unit and the kind.
func TestPlanShowsRealNamespaces(t *testing.T) {
	fleet := maps.Clone(smallFleet)
	maps.Copy(fleet, map[string]string{
		"apps/crds/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: crds
spec:
  source:
    manifests:
      path: manifests
  syncPolicies:
    - name: a
      destination:
        fleet: a
`,
		"apps/crds/manifests/gizmos.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  names: {kind: Gizmo, plural: gizmos, singular: gizmo}
  scope: Cluster
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`,
	})
	r := newTestRepo(t, fleet)
	r.write(map[string]string{
		"apps/chart/chart/templates/objects.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: auth-reader
  namespace: kube-system
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects:
  - {kind: ServiceAccount, name: chart, namespace: {{ .Release.Namespace }}}
---
apiVersion: example.com/v1
kind: Gizmo
metadata:
  name: gizmo
  namespace: {{ .Release.Namespace }}
---
apiVersion: example.com/v1
kind: Mystery
metadata:
  name: mystery
`,
	})
	r.render()
	p := r.plan(plan.Options{})
	ids := map[string][]string{}
	for _, c := range p.Clusters {
		for _, u := range c.Units {
			for _, o := range u.Objects {
				ids[c.Name] = append(ids[c.Name], o.ID())
			}
		}
	}
	for _, want := range []string{"RoleBinding kube-system/auth-reader", "Gizmo gizmo", "Mystery tools/mystery"} {
		found := false
		for _, id := range ids["c1"] {
			found = found || id == want
		}
		if !found {
			t.Errorf("c1: no %q in %v", want, ids["c1"])
		}
	}
	var warned []string
	for _, w := range p.Warnings {
		if strings.Contains(w, "scope of") {
			warned = append(warned, w)
		}
	}
	if len(warned) != 3 {
		t.Fatalf("scope warnings %q, want one per cluster for Mystery", warned)
	}
	for _, w := range warned {
		if !strings.Contains(w, "unit chart") || !strings.Contains(w, "Mystery.example.com") {
			t.Errorf("warning %q does not name the unit and the kind", w)
		}
		if strings.Contains(w, "Gizmo") {
			t.Errorf("warning %q: Gizmo's scope is known from the fleet's CRDs", w)
		}
	}
	var text strings.Builder
	if err := plan.WriteText(&text, p, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "RoleBinding kube-system/auth-reader") {
		t.Errorf("text plan does not show the RoleBinding in kube-system:\n%s", text.String())
	}
}
