package fleetrender_test

import (
	"reflect"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// TestHealthSettingsReachTheSlice: an application's failFast and
// healthChecks, with its fleets' default checks for the kinds it does not
// check, are in each cluster's unit, and read back from slice.yaml as the
// agent reads them.
func TestHealthSettingsReachTheSlice(t *testing.T) {
	base := map[string]string{
		"clusters/a.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: a\n",
		"clusters/b.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: b\n",
		"fleets/prod.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters: [a, b]\n" +
			"  healthChecks:\n    - apiVersion: example.com/v1\n      kind: Widget\n      current: \"false\"\n" +
			"    - apiVersion: batch.volcano.sh/v1alpha1\n      current: status.state.phase == 'Completed'\n",
		"fleets/edge.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: edge\nspec:\n  clusters: [b]\n" +
			"  healthChecks:\n    - apiVersion: x.example.com/v1\n      kind: Gadget\n      current: status.ok\n",
		"apps/web/m/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: default\n",
		"apps/web/app.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n  source:\n    manifests: {path: m}\n" +
			"  failFast: false\n  healthChecks:\n    - apiVersion: example.com/v1\n      kind: Widget\n      current: status.phase == 'Ready'\n      failed: status.phase == 'Broken'\n" +
			"  syncPolicies:\n    - destination: {fleet: prod}\n",
	}
	own := slice.HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "status.phase == 'Ready'", Failed: "status.phase == 'Broken'"}
	volcano := slice.HealthCheck{APIVersion: "batch.volcano.sh/v1alpha1", Current: "status.state.phase == 'Completed'"}
	gadget := slice.HealthCheck{APIVersion: "x.example.com/v1", Kind: "Gadget", Current: "status.ok"}
	want := map[string][]slice.HealthCheck{"a": {own, volcano}, "b": {own, gadget, volcano}}
	out := compileFiles(t, base, nil)
	found := 0
	for _, co := range out.Clusters {
		read, err := slice.Parse(slice.Marshal(co.Slice))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range read.Units {
			if u.Name != "web" {
				continue
			}
			found++
			if !u.WaitForTimeout {
				t.Errorf("cluster %s: failFast: false did not reach the unit", read.Cluster)
			}
			if !reflect.DeepEqual(u.HealthChecks, want[read.Cluster]) {
				t.Errorf("cluster %s: health checks %+v, want %+v", read.Cluster, u.HealthChecks, want[read.Cluster])
			}
		}
	}
	if found != 2 {
		t.Fatalf("unit web in %d slices, want 2", found)
	}
}
