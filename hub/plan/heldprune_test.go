package plan

import (
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// TestHeldPruneWarning: plan says when the agent will hold a prune, and
// when a decommission lets it through.
func TestHeldPruneWarning(t *testing.T) {
	out := func(decommission bool, units ...string) *fleetrender.ClusterOutput {
		s := &slice.Slice{Cluster: "c", Decommission: decommission}
		for _, u := range units {
			s.Units = append(s.Units, slice.Unit{Name: u})
		}
		return &fleetrender.ClusterOutput{Slice: s}
	}
	cases := []struct {
		base, head *fleetrender.ClusterOutput
		want       string
	}{
		{out(false, "a", "b", "c"), out(false), "3 of its 3 units leave its slice; its agent holds this prune"},
		{out(false, "a", "b", "c"), out(false, "a"), "2 of its 3 units leave"},
		{out(false, "a", "b", "c"), out(false, "a", "b"), ""},
		{out(false, "a", "b"), out(false, "c", "d"), ""}, // a rename: 2 of 4
		{out(false, "a", "b", "c"), out(true), "cluster c is decommissioned: its agent prunes all 3 units"},
		{nil, out(false), ""},
		{out(false, "a"), nil, ""},
	}
	for i, c := range cases {
		got := heldPruneWarning("c", c.base, c.head)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("case %d: %q, want %q", i, got, c.want)
		}
	}
}
