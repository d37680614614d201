package fleetrender

import (
	"fmt"
	"sort"
	"strings"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// topoSort orders units so that each comes after the units it depends on;
// among units that are ready together, by name. DependsOn must name units
// of the list.
func topoSort(units []slice.Unit) ([]slice.Unit, error) {
	byName := make(map[string]int, len(units))
	for i, u := range units {
		byName[u.Name] = i
	}
	indegree := make([]int, len(units))
	dependents := make([][]int, len(units))
	for i, u := range units {
		for _, d := range u.DependsOn {
			j, ok := byName[d]
			if !ok {
				return nil, fmt.Errorf("unit %s depends on missing unit %s: %w", u.Name, d, fleet.ErrDanglingReference)
			}
			indegree[i]++
			dependents[j] = append(dependents[j], i)
		}
	}
	var ready []int
	for i := range units {
		if indegree[i] == 0 {
			ready = append(ready, i)
		}
	}
	out := make([]slice.Unit, 0, len(units))
	for len(ready) > 0 {
		sort.Slice(ready, func(a, b int) bool { return units[ready[a]].Name < units[ready[b]].Name })
		i := ready[0]
		ready = ready[1:]
		out = append(out, units[i])
		for _, j := range dependents[i] {
			indegree[j]--
			if indegree[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	if len(out) != len(units) {
		var stuck []string
		for i, u := range units {
			if indegree[i] > 0 {
				stuck = append(stuck, u.Name)
			}
		}
		sort.Strings(stuck)
		return nil, fmt.Errorf("units %s: %w", strings.Join(stuck, ", "), fleet.ErrDependencyCycle)
	}
	return out, nil
}
