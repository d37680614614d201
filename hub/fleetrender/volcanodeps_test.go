package fleetrender_test

import (
	"slices"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// TestVolcanoUnitsWaitForVolcano: on a cluster where an application
// installs Volcano's CRDs, the generated flotilla-queues unit depends on
// that application and comes after it in the slice, so a fresh cluster
// waits for Volcano instead of failing until its CRDs exist; where no
// application installs them (Volcano installed otherwise), nothing changes.
func TestVolcanoUnitsWaitForVolcano(t *testing.T) {
	files := map[string]string{
		"clusters/a.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: a\n  labels: {volcano: fleet}\n",
		"clusters/b.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: b\n",
		"fleets/batch.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: batch\nspec:\n  clusters: [a, b]\n" +
			"  queues:\n    - name: training\n      weight: 1\n",
		"apps/volcano/m/crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: queues.scheduling.volcano.sh
spec:
  group: scheduling.volcano.sh
  names: {kind: Queue, plural: queues}
  scope: Cluster
  versions:
    - name: v1beta1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`,
		"apps/volcano/app.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: volcano\nspec:\n  source:\n    manifests: {path: m}\n" +
			"  syncPolicies:\n    - destination: {selector: {matchLabels: {volcano: fleet}}}\n",
	}
	out := compileFiles(t, files, nil)
	seen := 0
	for _, co := range out.Clusters {
		names := make([]string, len(co.Slice.Units))
		var queues *slice.Unit
		for i := range co.Slice.Units {
			names[i] = co.Slice.Units[i].Name
			if co.Slice.Units[i].Name == slice.UnitVolcanoQueues {
				queues = &co.Slice.Units[i]
			}
		}
		if queues == nil {
			t.Fatalf("cluster %s: no %s unit in %v", co.Slice.Cluster, slice.UnitVolcanoQueues, names)
		}
		seen++
		waits := slices.Contains(queues.DependsOn, "volcano")
		switch co.Slice.Cluster {
		case "a":
			if !waits || slices.Index(names, "volcano") > slices.Index(names, slice.UnitVolcanoQueues) {
				t.Errorf("cluster a: %s depends on %v, units in order %v; want it after and depending on volcano", slice.UnitVolcanoQueues, queues.DependsOn, names)
			}
		case "b":
			if waits {
				t.Errorf("cluster b (no volcano application): %s depends on %v", slice.UnitVolcanoQueues, queues.DependsOn)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("%d clusters with queues, want 2", seen)
	}
}
