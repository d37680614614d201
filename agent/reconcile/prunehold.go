package reconcile

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// DefaultPruneHoldFraction is Config.PruneHoldFraction when zero.
const DefaultPruneHoldFraction = slice.DefaultPruneHoldFraction

// holdPrune is slice.HoldsPrune: the rule plan warns with.
func holdPrune(gone, managed int, fraction float64, decommission bool) bool {
	return slice.HoldsPrune(gone, managed, fraction, decommission)
}

// heldPrune is what a cycle did not prune, for status and logs.
type heldPrune struct {
	units    []string // sorted
	managed  int
	fraction float64
}

// heldNamesShown bounds the unit names a PruneHeld message lists.
const heldNamesShown = 20

// message names the counts, the units and what releases them.
func (h *heldPrune) message(cluster string) string {
	names := strings.Join(h.units, ", ")
	if len(h.units) > heldNamesShown {
		names = strings.Join(h.units[:heldNamesShown], ", ") + fmt.Sprintf(" and %d more", len(h.units)-heldNamesShown)
	}
	return fmt.Sprintf("%d of %d managed units left the slice (the hold threshold is all of them or more than %g): not pruning %s until the cluster's slice carries decommission: true (flotilla cluster decommission %s)",
		len(h.units), h.managed, h.fraction, names, cluster)
}

// condition is the cluster's PruneHeld condition.
func (h *heldPrune) condition(cluster string) metav1.Condition {
	return metav1.Condition{Type: status.ConditionPruneHeld, Status: metav1.ConditionTrue,
		Reason: status.ReasonAwaitingDecommission, Message: h.message(cluster)}
}
