package fleetview

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// A unit the fleet repo suspends is reported by its agent as Suspended;
// `flotilla status` names it in the cluster's reason and under
// "Suspended units", in every format, without calling the cluster failing;
// a Behind cluster's reason starts with it too.
func TestStatusShowsSuspended(t *testing.T) {
	v := publishedFleet(t, []string{"member1", "member2", "member3"}, func(c string, doc *status.ClusterStatus) {
		if c == "member3" {
			doc.AppliedRevision = ""
		}
		if c != "member1" {
			// What the agent writes for a suspended unit.
			doc.Units[0].Suspended = true
			doc.Units[0].Conditions = []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSuspended,
				Message: "suspended in the fleet repo: not applied, pruned or corrected", LastTransitionTime: metav1.NewTime(t0)}}
		}
	})
	got := map[string]ClusterView{}
	for _, c := range v.Clusters {
		got[c.Name] = c
	}
	if c := got["member2"]; c.State != StateInSync || c.Reason != "Suspended: web" || strings.Join(c.SuspendedUnits, ",") != "web" {
		t.Errorf("member2: state %s, reason %q, suspended %v; want InSync, Suspended: web", c.State, c.Reason, c.SuspendedUnits)
	}
	if c := got["member3"]; c.State != StateBehind || c.Reason != "Suspended: web; not fully applied yet" {
		t.Errorf("member3: state %s, reason %q; want Behind, the suspension first", c.State, c.Reason)
	}
	if c := got["member1"]; c.State != StateInSync || len(c.SuspendedUnits) != 0 || c.Reason != "" {
		t.Errorf("member1: state %s, reason %q, suspended %v; want InSync and nothing suspended", c.State, c.Reason, c.SuspendedUnits)
	}
	for _, format := range []string{"table", "json", "yaml", "markdown"} {
		var b bytes.Buffer
		if err := WriteFleet(&b, v, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "Suspended") || !strings.Contains(b.String(), "web") {
			t.Errorf("%s output does not show the suspended unit:\n%s", format, b.String())
		}
	}
	var b bytes.Buffer
	if err := WriteFleet(&b, v, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Suspended units:\n  member2/web: Suspended") {
		t.Errorf("table output has no Suspended units section:\n%s", b.String())
	}
}
