package fleet

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Rollout releases a changed unit to its clusters in ordered waves, each
// gated by the previous wave's status in Git. On a Fleet it is the default
// for the fleet's applications; an Application's own spec.rollout
// overrides it.
type Rollout struct {
	// Waves are released in order; clusters in no wave form a last,
	// implicit wave.
	Waves []Wave `json:"waves"`
	// Bake is how long every cluster of a wave must report the new
	// revision applied and Ready before the next wave is released.
	Bake *metav1.Duration `json:"bake,omitempty"`
	// MaxFailures is the default for waves that do not set theirs
	// (default 0: any Failed cluster holds the rollout).
	MaxFailures *int32 `json:"maxFailures,omitempty"`
}

// BakeDuration is Bake, zero when unset.
func (ro *Rollout) BakeDuration() time.Duration {
	if ro.Bake == nil {
		return 0
	}
	return ro.Bake.Duration
}

// Wave is a set of clusters: exactly one of Clusters, Selector, Percent or
// Count. Percent and Count take, in wave order, clusters no Clusters or
// Selector wave names, sorted by name, so the choice is deterministic.
type Wave struct {
	Name     string                `json:"name,omitempty"`
	Clusters []string              `json:"clusters,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Percent of the rollout's clusters (rounded up).
	Percent *int32 `json:"percent,omitempty"`
	Count   *int32 `json:"count,omitempty"`
	// MaxFailures is how many of the wave's clusters may report Failed
	// while the next wave is still released.
	MaxFailures *int32 `json:"maxFailures,omitempty"`
}
