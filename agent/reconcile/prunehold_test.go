package reconcile

import (
	"strings"
	"testing"
)

// TestHoldPrune: a slice that removes all the cluster's units, or more
// than the fraction, is held unless it carries the decommission marker.
func TestHoldPrune(t *testing.T) {
	cases := []struct {
		gone, managed int
		fraction      float64
		decommission  bool
		want          bool
	}{
		{0, 0, 0.5, false, false},
		{0, 5, 0.5, false, false},
		{1, 1, 0.5, false, true},  // the only unit: all of them
		{1, 1, 1, false, true},    // all, whatever the fraction
		{3, 3, 0.5, false, true},  // an empty slice
		{3, 3, 0.5, true, false},  // decommissioned
		{1, 2, 0.5, false, false}, // half is not more than half
		{2, 3, 0.5, false, true},
		{1, 3, 0.5, false, false},
		{9, 10, 1, false, false}, // fraction 1: only all of them
		{2, 10, 0.1, false, true},
		{1, 10, 0.1, false, false},
		{5, 4, 0.5, false, true}, // more gone than counted: still held
	}
	for _, c := range cases {
		if got := holdPrune(c.gone, c.managed, c.fraction, c.decommission); got != c.want {
			t.Errorf("holdPrune(gone %d, managed %d, fraction %g, decommission %v) = %v, want %v",
				c.gone, c.managed, c.fraction, c.decommission, got, c.want)
		}
	}
}

// TestHeldPruneMessage: the condition names counts, units and the command.
func TestHeldPruneMessage(t *testing.T) {
	h := &heldPrune{units: []string{"a", "b", "flotilla-namespaces"}, managed: 3, fraction: 0.5}
	c := h.condition("edge-1")
	for _, want := range []string{"3 of 3", "a, b, flotilla-namespaces", "flotilla cluster decommission edge-1"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	if c.Type != "PruneHeld" || c.Status != "True" {
		t.Errorf("condition %+v", c)
	}
	many := &heldPrune{managed: 30, fraction: 0.5}
	for i := 0; i < 30; i++ {
		many.units = append(many.units, "u"+strings.Repeat("x", i))
	}
	if m := many.message("c"); !strings.Contains(m, "and 10 more") {
		t.Errorf("long list not shortened: %s", m)
	}
}
