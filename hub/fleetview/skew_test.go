package fleetview

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
)

// Status hides clock trouble and impostors: a heartbeat from the future
// beyond the tolerance is ClockSkew (not InSync), and a status ref whose
// head comes from another live instance than the commit before is
// Conflict.
func TestStatusHidesClockTroubleAndImpostors(t *testing.T) {
	ctx := context.Background()
	clusters := []string{"member1", "member2", "member4", "member6"}
	srv := gitserver.Start(t, gitserver.ForgeConfig(clusters...))
	url, err := srv.CreateRepo("fleet", "")
	if err != nil {
		t.Fatal(err)
	}
	rev := pushProductionFleet(t, srv, url, clusters)
	publish := func(cluster, instance string, at time.Time, takeOver bool) {
		t.Helper()
		w, err := statuswriter.NewWriter(statuswriter.WriterOptions{Cluster: cluster, URL: url, Auth: statusdoc.AgentAuth(srv, cluster),
			InstanceID: instance, TakeOver: takeOver, HeartbeatInterval: 30 * time.Second, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Publish(ctx, statusdoc.Ready(cluster, rev)); err != nil {
			t.Fatalf("publish %s: %v", cluster, err)
		}
	}
	now := t0
	publish("member1", "uid-1", now.Add(5*time.Minute), false) // beyond the 2m tolerance
	publish("member2", "uid-2", now.Add(time.Minute), false)   // within it
	// Two live agents named member4; the second forces its way in.
	publish("member4", "uid-4a", now.Add(-20*time.Second), false)
	publish("member4", "uid-4b", now, true)
	// member6 was re-installed: the old instance went quiet first.
	publish("member6", "uid-6a", now.Add(-time.Hour), false)
	publish("member6", "uid-6b", now, false)

	v, err := Read(ctx, ReadOptions{Repo: srv.RepoPath("fleet"), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ClusterView{}
	for _, c := range v.Clusters {
		got[c.Name] = c
	}
	if c := got["member1"]; c.State != StateClockSkew || c.ClockSkew == nil || c.ClockSkew.Duration != 5*time.Minute {
		t.Errorf("member1: state %s, skew %v, reason %q; want ClockSkew of 5m", c.State, c.ClockSkew, c.Reason)
	}
	if c := got["member2"]; c.State != StateInSync || c.ClockSkew != nil {
		t.Errorf("member2 (1m ahead, within tolerance): state %s, skew %v, reason %q; want InSync", c.State, c.ClockSkew, c.Reason)
	}
	if c := got["member4"]; c.State != StateConflict || !strings.Contains(c.Reason, "uid-4a") || c.InstanceID != "uid-4b" {
		t.Errorf("member4: state %s, instance %q, reason %q; want Conflict naming uid-4a", c.State, c.InstanceID, c.Reason)
	}
	if c := got["member6"]; c.State != StateInSync {
		t.Errorf("member6 (re-installed): state %s, reason %q; want InSync", c.State, c.Reason)
	}

	// A wider tolerance accepts member1's clock.
	v2, err := Read(ctx, ReadOptions{Repo: srv.RepoPath("fleet"), Now: func() time.Time { return now }, ClockSkewTolerance: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v2.Clusters {
		if c.Name == "member1" && c.State != StateInSync {
			t.Errorf("member1 with a 10m tolerance: state %s, reason %q; want InSync", c.State, c.Reason)
		}
	}

	want := map[string][]string{
		FormatTable:    {"ClockSkew", "5m ahead", "Conflict", "1 ClockSkew, 1 Conflict"},
		FormatMarkdown: {"ClockSkew", "5m ahead", "Conflict"},
		FormatJSON:     {`"state": "ClockSkew"`, `"clockSkew": "5m0s"`, `"state": "Conflict"`, `"instanceID": "uid-4b"`},
		FormatYAML:     {"state: ClockSkew", "clockSkew: 5m0s", "state: Conflict"},
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := WriteFleet(&b, v, format); err != nil {
			t.Fatal(err)
		}
		for _, w := range want[format] {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s output lacks %q:\n%s", format, w, b.String())
			}
		}
	}
}
