package forge_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/test/gitea"
)

// TestGiteaStickyComment: against a real Gitea, UpsertComment posts the
// plan's comment on a pull request once and edits that comment on later
// calls, leaving people's comments alone.
func TestGiteaStickyComment(t *testing.T) {
	srv := gitea.Start(t)
	ctx := context.Background()
	srv.CreateRepo(t, "fleet")
	srv.Commit(t, "fleet", "main", map[string]string{"README.md": "fleet\n"}, "init")
	srv.Commit(t, "fleet", "change", map[string]string{"README.md": "fleet v2\n"}, "change")
	pr := srv.CreatePull(t, "fleet", "change", "main")
	if err := srv.API(ctx, http.MethodPost, fmt.Sprintf("/api/v1/repos/%s/issues/%d/comments", srv.Repo("fleet"), pr), map[string]string{"body": "LGTM once the plan is green"}, nil); err != nil {
		t.Fatal(err)
	}
	client, err := forge.New(forge.Options{Kind: forge.Gitea, URL: srv.URL, Repo: srv.Repo("fleet"), Token: srv.Token})
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- flotilla-plan -->"
	first, err := client.UpsertComment(ctx, pr, marker, "## Plan\n\n1 cluster changes")
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.UpsertComment(ctx, pr, marker, "## Plan\n\n2 clusters change")
	if err != nil {
		t.Fatal(err)
	}
	if first == 0 || second != first {
		t.Fatalf("comment ids %d then %d, want the same comment edited", first, second)
	}
	var comments []struct {
		ID   int64  `json:"id"`
		Body string `json:"body"`
	}
	if err := srv.API(ctx, http.MethodGet, fmt.Sprintf("/api/v1/repos/%s/issues/%d/comments", srv.Repo("fleet"), pr), nil, &comments); err != nil {
		t.Fatal(err)
	}
	var plans, others int
	for _, c := range comments {
		switch {
		case strings.Contains(c.Body, marker):
			plans++
			if !strings.Contains(c.Body, "2 clusters change") {
				t.Errorf("plan comment not updated: %q", c.Body)
			}
		default:
			others++
		}
	}
	if plans != 1 || others != 1 {
		t.Fatalf("%d plan comments and %d others on #%d, want 1 and 1: %+v", plans, others, pr, comments)
	}
}
