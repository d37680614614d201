package plan

import (
	"fmt"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// moveCollector gathers objects that leave one unit and join another of
// the same cluster in the change: the agent hands them over without
// deleting them (agent/apply's ownership rule), which the per-unit lists of
// removed and added objects would not say.
type moveCollector struct {
	mu    sync.Mutex
	moves map[string][]string // sentence → clusters
}

// observe records one cluster's unit plans.
func (m *moveCollector) observe(cluster string, units []UnitPlan) {
	type side struct{ unit, id string }
	removed := map[string]side{}
	added := map[string]side{}
	for _, u := range units {
		for _, o := range u.Objects {
			gv, _ := schema.ParseGroupVersion(o.APIVersion)
			key := gv.Group + "\x00" + o.Kind + "\x00" + o.Namespace + "\x00" + o.Name
			switch o.Change {
			case Removed:
				removed[key] = side{u.Name, o.ID()}
			case Added:
				added[key] = side{u.Name, o.ID()}
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, from := range removed {
		to, ok := added[key]
		if !ok {
			continue
		}
		if m.moves == nil {
			m.moves = map[string][]string{}
		}
		s := fmt.Sprintf("%s moves from unit %s to unit %s: the agent hands it over without deleting it", from.id, from.unit, to.unit)
		m.moves[s] = append(m.moves[s], cluster)
	}
}

// notes returns one sentence per move, naming its clusters, sorted.
func (m *moveCollector) notes() []string {
	out := make([]string, 0, len(m.moves))
	for s, clusters := range m.moves {
		word := "cluster "
		if len(clusters) > 1 {
			word = "clusters "
		}
		out = append(out, s+" ("+word+clusterList(clusters)+")")
	}
	sort.Strings(out)
	return out
}

// newNotes are the compiler's notes of the head side (an application's
// copy of a fleet namespace left out) that the base did not have: a plan
// tells what the change decides, not what was decided before.
func newNotes(base, head []string) []string {
	seen := make(map[string]bool, len(base))
	for _, n := range base {
		seen[n] = true
	}
	var out []string
	for _, n := range head {
		if !seen[n] {
			out = append(out, n)
		}
	}
	return out
}
