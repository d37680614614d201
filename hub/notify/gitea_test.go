package notify

import (
	"context"
	"net/http"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitea"
)

// TestGiteaCommitStatuses: against a real Gitea, Send sets each status on
// the commit once (Gitea keeps the newest per context), records it on
// refs/flotilla/notify in the same repository, and a second run sends
// nothing; a changed state is sent and replaces the old one.
func TestGiteaCommitStatuses(t *testing.T) {
	srv := gitea.Start(t)
	ctx := context.Background()
	url := srv.CreateRepo(t, "fleet")
	head := srv.Commit(t, "fleet", "main", map[string]string{"README.md": "fleet\n"}, "init")
	client, err := forge.New(forge.Options{Kind: forge.Gitea, URL: srv.URL, Repo: srv.Repo("fleet"), Token: srv.Token})
	if err != nil {
		t.Fatal(err)
	}
	rec := &Recorder{Remote: url, Author: gitrepo.Signature{Name: "notify", Email: "notify@example.com"}}
	statuses := []forge.CommitStatus{
		{Commit: head, Context: "flotilla/web", State: forge.StatePending, Description: "0/2 Ready; applying on a, b", TargetURL: "http://dash.example/"},
		{Commit: head, Context: "flotilla/db", State: forge.StateFailure, Description: "failing on a (HealthCheckFailed: Job/db/migrate: Failed)"},
	}
	sent, err := Send(ctx, client, rec, statuses)
	if err != nil || len(sent) != 2 {
		t.Fatalf("first run sent %v, %v", sent, err)
	}
	if sent, err := Send(ctx, client, rec, statuses); err != nil || len(sent) != 0 {
		t.Fatalf("second run sent %v, %v; want nothing", sent, err)
	}
	statuses[0].State, statuses[0].Description = forge.StateSuccess, "Ready on 2 clusters"
	if sent, err := Send(ctx, client, rec, statuses); err != nil || len(sent) != 1 || sent[0] != statuses[0] {
		t.Fatalf("after a change sent %v, %v; want the new state of flotilla/web", sent, err)
	}

	var combined struct {
		State    string `json:"state"`
		Statuses []struct {
			Context     string `json:"context"`
			Status      string `json:"status"`
			Description string `json:"description"`
			TargetURL   string `json:"target_url"`
		} `json:"statuses"`
	}
	if err := srv.API(ctx, http.MethodGet, "/api/v1/repos/"+srv.Repo("fleet")+"/commits/"+head+"/status", nil, &combined); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range combined.Statuses {
		got[s.Context] = s.Status + ": " + s.Description
	}
	want := map[string]string{"flotilla/web": "success: Ready on 2 clusters", "flotilla/db": "failure: failing on a (HealthCheckFailed: Job/db/migrate: Failed)"}
	for ctxName, w := range want {
		if got[ctxName] != w {
			t.Errorf("Gitea's status %s = %q, want %q (all: %v)", ctxName, got[ctxName], w, got)
		}
	}
	if combined.State != "failure" {
		t.Errorf("combined state %q, want failure", combined.State)
	}
	var all []struct{ ID int64 }
	if err := srv.API(ctx, http.MethodGet, "/api/v1/repos/"+srv.Repo("fleet")+"/statuses/"+head+"?limit=50", nil, &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Errorf("Gitea holds %d statuses for the commit, want 3 (two, then one change): nothing was sent twice", len(all))
	}
}
