package fleetview

import (
	"bytes"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// An empty slice deletes the whole cluster no more: the agent holds the
// prune and says so, and `flotilla status` shows the cluster PruneHeld with
// the agent's counts and unit names, fleet-wide, next to a healthy one.
func TestStatusShowsPruneHeld(t *testing.T) {
	const held = "3 of 3 managed units left the slice and are not pruned: web, api, db"
	v := publishedFleet(t, []string{"member1", "member2"}, func(c string, doc *status.ClusterStatus) {
		if c == "member2" {
			// What the agent writes while it holds a prune.
			apimeta.SetStatusCondition(&doc.Conditions, metav1.Condition{Type: status.ConditionPruneHeld, Status: metav1.ConditionTrue,
				Reason: status.ReasonAwaitingDecommission, Message: held, LastTransitionTime: metav1.NewTime(t0)})
			apimeta.SetStatusCondition(&doc.Conditions, metav1.Condition{Type: status.ConditionReady, Status: metav1.ConditionFalse,
				Reason: status.ReasonAwaitingDecommission, Message: "units that left the slice are held", LastTransitionTime: metav1.NewTime(t0)})
		}
	})
	got := map[string]ClusterView{}
	for _, c := range v.Clusters {
		got[c.Name] = c
	}
	if c := got["member2"]; c.State != StatePruneHeld || c.Reason != held {
		t.Errorf("member2: state %s, reason %q; want PruneHeld with the agent's message", c.State, c.Reason)
	}
	if c := got["member1"]; c.State != StateInSync {
		t.Errorf("member1: state %s, reason %q; want InSync", c.State, c.Reason)
	}
	if v.Summary[StatePruneHeld] != 1 {
		t.Errorf("summary %v: want one PruneHeld cluster", v.Summary)
	}
	for _, format := range []string{"table", "json", "yaml", "markdown"} {
		var b bytes.Buffer
		if err := WriteFleet(&b, v, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "PruneHeld") || !strings.Contains(b.String(), "web, api, db") {
			t.Errorf("%s output does not show the held prune:\n%s", format, b.String())
		}
	}
}
