package fleet

import (
	"fmt"
	"sort"
)

// RestWave names the implicit last wave: the rollout's clusters no wave
// names. A declared wave may not take this name.
const RestWave = "rest"

// ResolvedWave is one wave of a rollout over concrete clusters.
type ResolvedWave struct {
	Name string
	// Clusters are sorted by name.
	Clusters    []string
	MaxFailures int
}

// Destinations returns every cluster the application is deployed to,
// sorted by name, each once.
func (r *Repo) Destinations(a *Application) []*Cluster {
	var out []*Cluster
	for _, sp := range a.Spec.SyncPolicies {
		out = append(out, r.Resolve(sp.Destination)...)
	}
	return uniqueSorted(out)
}

// RolloutOf returns the rollout that governs the application — its own
// spec.rollout, else that of the fleets its destinations name (the first by
// name when several declare one; Load rejects that unless the application
// sets its own) — or nil when its changes reach every cluster at once.
func (r *Repo) RolloutOf(a *Application) *Rollout {
	if a.Spec.Rollout != nil {
		return a.Spec.Rollout
	}
	if fs := r.rolloutFleets(a); len(fs) > 0 {
		return fs[0].Spec.Rollout
	}
	return nil
}

// rolloutFleets are the destination fleets of a that declare a rollout,
// sorted by name.
func (r *Repo) rolloutFleets(a *Application) []*Fleet {
	var out []*Fleet
	seen := map[string]bool{}
	for _, sp := range a.Spec.SyncPolicies {
		f := r.Fleet(sp.Destination.Fleet)
		if f == nil || f.Spec.Rollout == nil || seen[f.Metadata.Name] {
			continue
		}
		seen[f.Metadata.Name] = true
		out = append(out, f)
	}
	return sortedFleets(out)
}

// Waves resolves the rollout of an application over its destinations:
// declared waves in order, then the implicit RestWave when clusters remain.
// Nil when the application has no rollout.
func (r *Repo) Waves(a *Application) []ResolvedWave {
	ro := r.RolloutOf(a)
	if ro == nil {
		return nil
	}
	return r.ResolveWaves(ro, r.Destinations(a))
}

// ResolveWaves assigns members to the rollout's waves. Clusters and
// Selector waves take the members they name (a cluster named by two goes to
// the first; Load rejects that overlap); Percent and Count waves then take,
// in wave order, the members no such wave named, sorted by name. Percent is
// of all members, rounded up. Empty declared waves are kept, so wave
// indexes match the spec; an empty RestWave is left out.
func (r *Repo) ResolveWaves(ro *Rollout, members []*Cluster) []ResolvedWave {
	names := make([]string, len(members))
	isMember := map[string]bool{}
	for i, c := range members {
		names[i] = c.Metadata.Name
		isMember[c.Metadata.Name] = true
	}
	sort.Strings(names)
	assigned := map[string]bool{}
	out := make([]ResolvedWave, len(ro.Waves))
	for i, w := range ro.Waves {
		out[i] = ResolvedWave{Name: WaveName(w, i), MaxFailures: maxFailures(ro, w)}
		var picked []string
		switch {
		case len(w.Clusters) > 0:
			for _, n := range w.Clusters {
				if isMember[n] {
					picked = append(picked, n)
				}
			}
		case w.Selector != nil:
			for _, c := range r.pick(nil, w.Selector, nil) {
				if isMember[c.Metadata.Name] {
					picked = append(picked, c.Metadata.Name)
				}
			}
		default:
			continue
		}
		for _, n := range picked {
			if !assigned[n] {
				assigned[n] = true
				out[i].Clusters = append(out[i].Clusters, n)
			}
		}
		sort.Strings(out[i].Clusters)
	}
	pool := make([]string, 0, len(names))
	for _, n := range names {
		if !assigned[n] {
			pool = append(pool, n)
		}
	}
	for i, w := range ro.Waves {
		var want int
		switch {
		case w.Percent != nil:
			want = (int(*w.Percent)*len(names) + 99) / 100
		case w.Count != nil:
			want = int(*w.Count)
		default:
			continue
		}
		want = max(0, min(want, len(pool)))
		out[i].Clusters = append([]string(nil), pool[:want]...)
		pool = pool[want:]
	}
	if len(pool) > 0 {
		out = append(out, ResolvedWave{Name: RestWave, Clusters: pool, MaxFailures: maxFailures(ro, Wave{})})
	}
	return out
}

// WaveName is the wave's name, or wave-<n> (1-based) when it has none.
func WaveName(w Wave, i int) string {
	if w.Name != "" {
		return w.Name
	}
	return fmt.Sprintf("wave-%d", i+1)
}

func maxFailures(ro *Rollout, w Wave) int {
	switch {
	case w.MaxFailures != nil:
		return int(*w.MaxFailures)
	case ro.MaxFailures != nil:
		return int(*ro.MaxFailures)
	}
	return 0
}
