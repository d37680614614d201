package fleetview

import "slices"

// UnhealthyStates are the states `flotilla status --exit-code` fails on:
// the cluster is broken, gone quiet, or its status cannot be believed.
// Behind and NoStatus are normal during a rollout or an install;
// PruneHeld, ClockSkew and Conflict wait for a person's decision and show
// in the view.
var UnhealthyStates = []State{StateFailing, StateUnreachable, StateUntrusted}

// Unhealthy returns the clusters of v in one of UnhealthyStates, in v's
// order.
func (v *View) Unhealthy() []ClusterView {
	var out []ClusterView
	for _, c := range v.Clusters {
		if slices.Contains(UnhealthyStates, c.State) {
			out = append(out, c)
		}
	}
	return out
}
