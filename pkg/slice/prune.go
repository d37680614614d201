package slice

// DefaultPruneHoldFraction is the agent's default --prune-hold-fraction.
const DefaultPruneHoldFraction = 0.5

// HoldsPrune is the agent's rule for units leaving a slice: when they are
// all the units it manages, or more than fraction of them, it does not
// prune them unless the slice is marked Decommission. A cluster that drops
// out of every fleet gets an empty slice, and pruning that would delete
// everything on it, namespaces included; a mistake in Git must not do that
// silently. plan uses the same rule to warn of a held prune.
func HoldsPrune(gone, managed int, fraction float64, decommission bool) bool {
	if decommission || gone == 0 {
		return false
	}
	return gone >= managed || float64(gone) > fraction*float64(managed)
}
