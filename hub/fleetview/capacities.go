package fleetview

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/flotilla-gitops/flotilla/pkg/placement"
)

// Capacities is the hub's view of each cluster's last reported capacity,
// for GlobalJob BestFit placement (slice.CapacitySource). Clusters that
// reported none are absent; the compiler then falls back to their
// Cluster.spec.capacity hints.
type Capacities map[string]*placement.Capacity

// CapacityFor returns a cluster's reported capacity.
func (c Capacities) CapacityFor(cluster string) (*placement.Capacity, bool) {
	cp, ok := c[cluster]
	return cp, ok
}

// CapacitiesFrom takes the capacity snapshot of every trusted document.
// Quantities that do not parse are left out and named in the warnings.
func CapacitiesFrom(docs *Documents) (Capacities, []string) {
	out := Capacities{}
	var warnings []string
	if docs == nil {
		return out, nil
	}
	for _, cd := range docs.Clusters {
		if cd.Document == nil || cd.Document.Capacity == nil {
			continue
		}
		sc := cd.Document.Capacity
		bad := func(field string, err error) {
			warnings = append(warnings, fmt.Sprintf("cluster %s status capacity %s: %v", cd.Cluster, field, err))
		}
		free, err := parseList(sc.Free)
		if err != nil {
			bad("free", err)
		}
		cp := &placement.Capacity{Free: free}
		for _, q := range sc.Queues {
			capability, err := parseList(q.Capability)
			if err != nil {
				bad("queue "+q.Name+" capability", err)
			}
			if len(capability) == 0 {
				continue
			}
			allocated, err := parseList(q.Allocated)
			if err != nil {
				bad("queue "+q.Name+" allocated", err)
			}
			room := corev1.ResourceList{}
			for name, c := range capability {
				r := c.DeepCopy()
				if a, ok := allocated[name]; ok {
					r.Sub(a)
				}
				if r.Sign() < 0 {
					r = resource.Quantity{}
				}
				room[name] = r
			}
			if cp.QueueFree == nil {
				cp.QueueFree = map[string]corev1.ResourceList{}
			}
			cp.QueueFree[q.Name] = room
		}
		out[cd.Cluster] = cp
	}
	sort.Strings(warnings)
	return out, warnings
}

// parseList parses a status quantity map; unparsable entries are skipped
// and reported.
func parseList(m map[string]string) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	var firstErr error
	for name, s := range m {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s %q: %w", name, s, err)
			}
			continue
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, firstErr
}
