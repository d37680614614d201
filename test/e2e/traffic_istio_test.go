package e2e_test

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/hub/traffic"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

const trafficNS = "fleetext-traffic"

func trafficRoute(v1, v2 string) string {
	return `apiVersion: flotilla.dev/v1alpha1
kind: TrafficRoute
metadata:
  name: web
spec:
  destination:
    clusters: [e2e]
  namespace: ` + trafficNS + `
  host: web
  subsets:
    - name: v1
      labels: {version: v1}
    - name: v2
      labels: {version: v2}
  http:
    - name: beta-testers
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
          weight: ` + v1 + `
        - subset: v2
          weight: ` + v2 + `
`
}

// readIstio reads one Istio object back from the API server.
func readIstio(t *testing.T, k client.Client, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(traffic.APIVersion, kind))
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: trafficNS, Name: name}, u); err != nil {
		t.Fatalf("get %s: %v", kind, err)
	}
	return u
}

func canaryWeights(t *testing.T, vs *unstructured.Unstructured) []int64 {
	t.Helper()
	http, _, _ := unstructured.NestedSlice(vs.Object, "spec", "http")
	if len(http) != 2 {
		t.Fatalf("VirtualService has %d HTTP routes", len(http))
	}
	route, _, _ := unstructured.NestedSlice(http[1].(map[string]any), "route")
	var out []int64
	for _, r := range route {
		w, _, _ := unstructured.NestedInt64(r.(map[string]any), "weight")
		out = append(out, w)
	}
	return out
}

// TestTrafficRouteIstio applies a rendered TrafficRoute to a cluster with
// Istio's CRDs (from the pinned istio.io/api module): the VirtualService
// and DestinationRule are accepted by Istio's schema and read back exactly
// as rendered (nothing pruned), with the weights; a canary step that
// changes only the weights re-applies only the VirtualService.
func TestTrafficRouteIstio(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	if err := c.ApplyCRDFiles(testCtx(t), istioCRDs(t)); err != nil {
		t.Fatal(err)
	}
	repo := newFleetExtRepo(t, c, "e2e", "fleetext-traffic-inventory", map[string]string{
		"clusters/e2e.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: e2e\n",
		"fleets/e2e.yaml":   "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: e2e\nspec:\n  clusters: [e2e]\n  namespaces:\n    - name: " + trafficNS + "\n",
		"routes/web.yaml":   trafficRoute("90", "10"),
	})
	s, _ := repo.renderAndApply()
	var names []string
	for _, u := range s.Units {
		names = append(names, u.Name)
	}
	if got := strings.Join(names, " "); got != "flotilla-namespaces flotilla-routes" {
		t.Fatalf("units %s", got)
	}
	for _, want := range repo.rendered[slice.UnitRoutes] {
		got := readIstio(t, k, want.GetKind(), want.GetName())
		if !reflect.DeepEqual(got.Object["spec"], want.Object["spec"]) {
			t.Errorf("%s read back differs from the rendered one:\n got %v\nwant %v", want.GetKind(), got.Object["spec"], want.Object["spec"])
		}
	}
	vs := readIstio(t, k, traffic.KindVirtualService, "web")
	if w := canaryWeights(t, vs); !reflect.DeepEqual(w, []int64{90, 10}) {
		t.Errorf("weights %v, want [90 10]", w)
	}
	beta := vs.Object["spec"].(map[string]any)["http"].([]any)[0].(map[string]any)
	header, _, _ := unstructured.NestedString(beta, "headers", "request", "set", "x-canary-version")
	exact, _, _ := unstructured.NestedString(beta["match"].([]any)[0].(map[string]any), "headers", "x-user-role", "exact")
	if header != "v2" || exact != "beta-tester" {
		t.Errorf("beta route: header set %q, match %q", header, exact)
	}
	dr := readIstio(t, k, traffic.KindDestinationRule, "web")
	if subsets, _, _ := unstructured.NestedSlice(dr.Object, "spec", "subsets"); len(subsets) != 2 {
		t.Errorf("DestinationRule subsets %v", subsets)
	}

	t.Run("canary step", func(t *testing.T) {
		repo.Write("routes/web.yaml", trafficRoute("75", "25"))
		_, results := repo.renderAndApply()
		res := results[slice.UnitRoutes]
		if res.Configured != 1 || res.Unchanged != 1 || res.Created != 0 {
			t.Errorf("routes unit: %d configured, %d unchanged, %d created; want only the VirtualService configured", res.Configured, res.Unchanged, res.Created)
		}
		for _, e := range res.ChangeSet {
			if strings.Contains(e.Subject, "DestinationRule") && e.Action.String() != "unchanged" {
				t.Errorf("DestinationRule %s", e.Action)
			}
		}
		if w := canaryWeights(t, readIstio(t, k, traffic.KindVirtualService, "web")); !reflect.DeepEqual(w, []int64{75, 25}) {
			t.Errorf("weights %v, want [75 25]", w)
		}
	})
}
