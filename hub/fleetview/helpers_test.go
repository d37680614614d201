package fleetview

import (
	"context"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
)

// t0 is the fixture's fixed time: the golden files depend on it.
var t0 = statusdoc.T0

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
		doc := statusdoc.Ready(c, rev)
		if change != nil {
			change(c, doc)
		}
		w, err := statuswriter.NewWriter(statuswriter.WriterOptions{Cluster: c, URL: url, Auth: statusdoc.AgentAuth(srv, c),
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
