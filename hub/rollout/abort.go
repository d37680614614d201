package rollout

import (
	"fmt"
	"slices"
	"sort"

	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// AbortChoice is the unit abort gives one cluster, and why.
type AbortChoice struct {
	Cluster string `json:"cluster"`
	Hash    string `json:"hash"`
	Why     string `json:"why"`
}

func (c AbortChoice) String() string {
	return fmt.Sprintf("%s gets unit %s (%s)", c.Cluster, shortHash(c.Hash), c.Why)
}

// ChooseAbort decides which kept unit abort gives each cluster whose unit
// the rollout changed: the newest content its agent reports Ready there
// (the unit's readyHashes) that is kept for it and is not what this
// rollout gave it. current is each cluster's committed unit hash; it is
// what this rollout gave the cluster when it differs from Previous. The
// unit the cluster had when the rollout started may itself be a failed
// revision (a fix rolled out over a change that failed there), which is
// why status, not the start, decides. Without a usable status (none, an
// older agent's, or no kept content Ready there) the cluster gets its
// Previous unit, and Why says so. docs holds trusted documents only.
func ChooseAbort(st *State, unit string, current map[string]string, docs map[string]*status.ClusterStatus) []AbortChoice {
	clusters := make([]string, 0, len(st.Previous))
	for c := range st.Previous {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	out := make([]AbortChoice, 0, len(clusters))
	for _, c := range clusters {
		prev := st.Previous[c]
		kept := append([]string{prev}, st.Earlier[c]...)
		given := ""
		if h := current[c]; h != prev {
			given = h
		}
		choice := AbortChoice{Cluster: c, Hash: prev}
		var us *status.UnitStatus
		if d := docs[c]; d != nil {
			for i := range d.Units {
				if d.Units[i].Name == unit {
					us = &d.Units[i]
				}
			}
		}
		switch {
		case docs[c] == nil:
			choice.Why = "no trusted status: the unit it had when the rollout started"
		case us == nil || !us.HasReadiness():
			choice.Why = "its status does not say which contents were Ready there (an older agent): the unit it had when the rollout started"
		default:
			choice.Why = "no kept unit was Ready there: the unit it had when the rollout started"
			for _, h := range us.ReadyHashes {
				if h != given && slices.Contains(kept, h) {
					choice.Hash, choice.Why = h, "its last unit Ready there"
					break
				}
			}
		}
		out = append(out, choice)
	}
	return out
}

// Restore is the State.Restore of choices: the clusters whose choice is
// not their Previous unit.
func Restore(st *State, choices []AbortChoice) map[string]string {
	out := map[string]string{}
	for _, c := range choices {
		if c.Hash != st.Previous[c.Cluster] {
			out[c.Cluster] = c.Hash
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// AbortTargets lists the unit an aborted state gives each cluster, as
// "a1 gets unit 0b748dcab05e", sorted by cluster.
func (s *State) AbortTargets() string {
	clusters := make([]string, 0, len(s.Previous))
	for c := range s.Previous {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	out := ""
	for i, c := range clusters {
		if i > 0 {
			out += ", "
		}
		out += c + " gets unit " + shortHash(s.AbortTarget(c))
	}
	return out
}
