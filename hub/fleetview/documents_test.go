package fleetview

import (
	"context"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

func TestDocuments(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	docs, err := ReadDocuments(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	if len(docs.Clusters) != len(fixtureClusters) || docs.Revision == "" {
		t.Fatalf("ReadDocuments: %d clusters at %q", len(docs.Clusters), docs.Revision)
	}
	by := map[string]ClusterDocument{}
	for _, cd := range docs.Clusters {
		by[cd.Cluster] = cd
	}
	if d := by["member1"].Document; d == nil || len(d.Jobs) != 2 || by["member1"].StatusCommit == "" {
		t.Errorf("member1: %+v", by["member1"])
	}
	for _, name := range []string{"member4", "member5", "member6"} {
		if cd := by[name]; cd.Document != nil || cd.Trust == nil || cd.Trust.Trusted {
			t.Errorf("%s's untrusted status was believed: %+v", name, cd)
		}
	}
	if cd := by["edge-2"]; cd.Document != nil || cd.Trust != nil {
		t.Errorf("edge-2 has no status ref: %+v", cd)
	}
	if !strings.Contains(strings.Join(docs.Warnings, "\n"), "ghost") {
		t.Errorf("the stray ref is not warned about: %q", docs.Warnings)
	}

	// Against a working tree's clusters (as render has them).
	dir := t.TempDir()
	treefile.Write(t, dir, map[string]string{
		"clusters/member1.yaml": clusterYAML("member1", "production", "cloud", ""),
		"clusters/member6.yaml": clusterYAML("member6", "staging", "cloud", ""),
		"clusters/new.yaml":     clusterYAML("new", "staging", "cloud", ""),
	})
	repo, err := fleet.Load(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DocumentsFor(ctx, ReadOptions{Repo: f.bare}, repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Clusters) != 3 || got.Clusters[0].Cluster != "member1" || got.Clusters[0].Document == nil ||
		got.Clusters[1].Document != nil || got.Clusters[2].Trust != nil {
		t.Fatalf("DocumentsFor: %+v", got.Clusters)
	}
}
