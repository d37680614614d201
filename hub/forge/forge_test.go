package forge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestForgeRequests: the request each forge's API takes, as documented by
// GitHub (POST /repos/{owner}/{repo}/statuses/{sha}) and GitLab (POST
// /projects/{id}/statuses/{sha}, state "failed"); Gitea's, GitHub's shape,
// is tested against a real Gitea in test/e2e. A refusal names the status
// and the forge's answer, never the token.
func TestForgeRequests(t *testing.T) {
	const token = "s3cret-token"
	type seen struct {
		path, auth string
		body       map[string]string
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &body)
		mu.Lock()
		got = append(got, seen{r.URL.EscapedPath(), r.Header.Get("Authorization") + r.Header.Get("PRIVATE-TOKEN"), body})
		mu.Unlock()
		if strings.Contains(r.URL.Path, "denied") {
			http.Error(w, `{"message":"Resource not accessible by integration"}`, http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	s := CommitStatus{Commit: "abc123", Context: "flotilla/web", State: StateFailure, Description: strings.Repeat("x", 200), TargetURL: "https://dash"}

	gh, err := New(Options{Kind: GitHub, URL: srv.URL, Repo: "ops/fleet", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if err := gh.SetStatus(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	gl, err := New(Options{Kind: GitLab, URL: srv.URL, Repo: "ops/fleet", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if err := gl.SetStatus(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d requests", len(got))
	}
	if g := got[0]; g.path != "/api/v3/repos/ops/fleet/statuses/abc123" || g.auth != "Bearer "+token || g.body["state"] != "failure" ||
		g.body["context"] != "flotilla/web" || len([]rune(g.body["description"])) != 140 || g.body["target_url"] != "https://dash" {
		t.Errorf("GitHub request: %+v", g)
	}
	if g := got[1]; g.path != "/api/v4/projects/ops%2Ffleet/statuses/abc123" || g.auth != token || g.body["state"] != "failed" || g.body["name"] != "flotilla/web" {
		t.Errorf("GitLab request: %+v", g)
	}
	denied, _ := New(Options{Kind: Gitea, URL: srv.URL, Repo: "ops/denied", Token: token})
	err = denied.SetStatus(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "not accessible") || strings.Contains(err.Error(), token) {
		t.Fatalf("refused request: %v", err)
	}
	if _, err := New(Options{Kind: "bitbucket", URL: srv.URL, Repo: "a/b", Token: token}); err == nil {
		t.Error("unknown forge accepted")
	}
}

// TestGitLabStickyComment: on GitLab the comment is a merge request note,
// found by its marker among the notes and edited with PUT.
func TestGitLabStickyComment(t *testing.T) {
	var mu sync.Mutex
	notes := []map[string]any{{"id": 7, "body": "looks good"}}
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Method+" "+r.URL.EscapedPath())
		var body map[string]string
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &body)
		switch {
		case r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(notes)
		case r.Method == http.MethodPost:
			notes = append(notes, map[string]any{"id": 9, "body": body["body"]})
			_ = json.NewEncoder(w).Encode(map[string]any{"id": 9})
		case r.Method == http.MethodPut:
			notes[1]["body"] = body["body"]
			_ = json.NewEncoder(w).Encode(map[string]any{"id": 9})
		}
	}))
	defer srv.Close()
	c, err := New(Options{Kind: GitLab, URL: srv.URL, Repo: "ops/fleet", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"plan one", "plan two"} {
		if id, err := c.UpsertComment(context.Background(), 3, "<!-- flotilla-plan -->", body); err != nil || id != 9 {
			t.Fatalf("UpsertComment(%q) = %d, %v", body, id, err)
		}
	}
	want := []string{
		"GET /api/v4/projects/ops%2Ffleet/merge_requests/3/notes", "POST /api/v4/projects/ops%2Ffleet/merge_requests/3/notes",
		"GET /api/v4/projects/ops%2Ffleet/merge_requests/3/notes", "PUT /api/v4/projects/ops%2Ffleet/merge_requests/3/notes/9",
	}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	if notes[1]["body"] != "<!-- flotilla-plan -->\nplan two" || notes[0]["body"] != "looks good" {
		t.Fatalf("notes: %v", notes)
	}
}
