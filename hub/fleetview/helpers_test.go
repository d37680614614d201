package fleetview

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// t0 is the fixture's fixed time: the golden files depend on it.
var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

func agentAuth(srv *gitserver.Server, cluster string) gitrepo.Auth {
	user := gitserver.AgentUser(cluster)
	return gitrepo.Auth{Username: user, Password: srv.Password(user)}
}

// readyDoc is a healthy document for cluster at revision rev.
func readyDoc(cluster, rev string, units ...string) *status.ClusterStatus {
	if len(units) == 0 {
		units = []string{"web"}
	}
	d := &status.ClusterStatus{
		Cluster:         cluster,
		Agent:           status.Agent{Version: "test"},
		DesiredRevision: rev, FetchedRevision: rev, AppliedRevision: rev,
		Conditions: readyConditions("Applied revision: " + rev),
	}
	for _, u := range units {
		d.Units = append(d.Units, status.UnitStatus{Name: u, Hash: "sha256:" + u, AppliedRevision: rev, Objects: 2,
			Conditions: readyConditions("")})
	}
	return d
}

func readyConditions(msg string) []metav1.Condition {
	return []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSucceeded, Message: msg,
		LastTransitionTime: metav1.NewTime(t0)}}
}

// failUnit marks a unit of d as failed to apply with msg.
func failUnit(d *status.ClusterStatus, unit, reason, msg string) {
	for i := range d.Units {
		if d.Units[i].Name == unit {
			d.Units[i].LastError = msg
			d.Units[i].Conditions = []metav1.Condition{
				{Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(t0)},
				{Type: status.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(t0)},
			}
		}
	}
	d.AppliedRevision = ""
	d.Conditions = []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: "units " + unit + " not ready", LastTransitionTime: metav1.NewTime(t0)}}
}

// pushProductionFleet pushes the first commit of a fleet repo whose
// clusters are all members of fleet production, each with a slice, and
// returns its revision.
func pushProductionFleet(t testing.TB, srv *gitserver.Server, url string, clusters []string) string {
	t.Helper()
	files := map[string][]byte{"fleets/production.yaml": []byte(fleetYAML("production", "env: production", "30s", 3))}
	for _, c := range clusters {
		files["clusters/"+c+".yaml"] = []byte(clusterYAML(c, "production", "cloud", ""))
		files[slice.SlicePath(c)] = []byte(sliceYAML(c, "v1"))
	}
	maint := gitrepo.Auth{Username: gitserver.Maintainer, Password: srv.Password(gitserver.Maintainer)}
	res, err := gitrepo.PushFiles(context.Background(), url, "refs/heads/main", files, "Initial fleet",
		gitrepo.Signature{Name: "Alice", Email: "alice@example.com", When: t0.Add(-time.Hour)}, gitrepo.PushOptions{Auth: maint})
	if err != nil {
		t.Fatal(err)
	}
	return "main@sha1:" + res.Hash
}

// publishedFleet publishes, for each of clusters, readyDoc at the
// production fleet's revision as changed by change (nil: as is), and reads
// the fleet's view at t0.
func publishedFleet(t *testing.T, clusters []string, change func(cluster string, doc *status.ClusterStatus)) *View {
	t.Helper()
	ctx := context.Background()
	srv := gitserver.Start(t, gitserver.ForgeConfig(clusters...))
	url, err := srv.CreateRepo("fleet", "")
	if err != nil {
		t.Fatal(err)
	}
	rev := pushProductionFleet(t, srv, url, clusters)
	for _, c := range clusters {
		doc := readyDoc(c, rev)
		if change != nil {
			change(c, doc)
		}
		w, err := statuswriter.NewWriter(statuswriter.WriterOptions{Cluster: c, URL: url, Auth: agentAuth(srv, c),
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
	return v
}
