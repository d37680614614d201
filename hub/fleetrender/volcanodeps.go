package fleetrender

import (
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// volcanoCRDs are the CustomResourceDefinitions the generated Volcano
// units apply objects of: Queues (flotilla-queues) and Jobs (job-*).
var volcanoCRDs = map[string]bool{
	"queues.scheduling.volcano.sh": true,
	"jobs.batch.volcano.sh":        true,
}

// waitForVolcano makes the cluster's generated Volcano units depend on the
// applications that install Volcano's CRDs there (the template's
// apps/volcano, from the upstream chart), so that on a fresh cluster they
// wait for Volcano (DependencyNotReady) instead of failing until its CRDs
// exist. Applications never depend on Volcano units, so this adds no
// cycle.
func waitForVolcano(d *clusterDraft, objects map[*unitContent]*unitObjects) {
	var installers []string
	for _, u := range d.units {
		uo := objects[d.contents[u.Name]]
		if d.apps[u.Name] == nil || uo == nil {
			continue
		}
		for _, k := range uo.keys {
			if k.group == "apiextensions.k8s.io" && k.kind == "CustomResourceDefinition" && volcanoCRDs[k.name] {
				installers = append(installers, u.Name)
				break
			}
		}
	}
	if len(installers) == 0 {
		return
	}
	for i := range d.units {
		if d.units[i].Kind == slice.UnitVolcano {
			d.units[i].DependsOn = dedupeSorted(sortedCopy(append(d.units[i].DependsOn, installers...)))
		}
	}
}
