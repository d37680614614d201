package status

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPruneHeld: only a True PruneHeld condition reports a held prune.
func TestPruneHeld(t *testing.T) {
	doc := &ClusterStatus{}
	if PruneHeld(doc) != "" {
		t.Error("held without a condition")
	}
	doc.Conditions = []metav1.Condition{{Type: ConditionPruneHeld, Status: metav1.ConditionFalse, Message: "x"}}
	if PruneHeld(doc) != "" {
		t.Error("held with the condition False")
	}
	doc.Conditions[0].Status = metav1.ConditionTrue
	if PruneHeld(doc) != "x" {
		t.Errorf("PruneHeld = %q", PruneHeld(doc))
	}
}
