package fleetstatus

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// A unit the fleet repo suspends is reported by its agent as Suspended;
// `flotilla status` names it in the cluster's reason and under
// "Suspended units", in every format, without calling the cluster failing.
func TestStatusShowsSuspended(t *testing.T) {
	ctx := context.Background()
	clusters := []string{"member1", "member2"}
	srv := gitserver.Start(t, gitserver.ForgeConfig(clusters...))
	url, err := srv.CreateRepo("fleet", "")
	if err != nil {
		t.Fatal(err)
	}
	rev := pushProductionFleet(t, srv, url, clusters)
	for _, c := range clusters {
		doc := readyDoc(c, rev)
		if c == "member2" {
			// What the agent writes for a suspended unit.
			doc.Units[0].Suspended = true
			doc.Units[0].Conditions = []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSuspended,
				Message: "suspended in the fleet repo: not applied, pruned or corrected", LastTransitionTime: metav1.NewTime(t0)}}
		}
		w, err := status.NewWriter(status.WriterOptions{Cluster: c, URL: url, Auth: agentAuth(srv, c),
			HeartbeatInterval: 30 * time.Second, Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Publish(ctx, doc); err != nil {
			t.Fatalf("publish %s: %v", c, err)
		}
	}
	v, err := Read(ctx, ReadOptions{Repo: srv.RepoPath("fleet"), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ClusterView{}
	for _, c := range v.Clusters {
		got[c.Name] = c
	}
	if c := got["member2"]; c.State != StateInSync || c.Reason != "Suspended: web" || strings.Join(c.SuspendedUnits, ",") != "web" {
		t.Errorf("member2: state %s, reason %q, suspended %v; want InSync, Suspended: web", c.State, c.Reason, c.SuspendedUnits)
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
