package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

func TestSummarize(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name  string
		app   AppState
		state State
		desc  string
	}{
		{"every cluster Ready", AppState{Application: "web", Clusters: []ClusterState{
			{Cluster: "a", Phase: rollout.PhaseReady}, {Cluster: "b", Phase: rollout.PhaseReady}}},
			StateSuccess, "Ready on 2 clusters"},
		{"applying", AppState{Application: "web", Clusters: []ClusterState{
			{Cluster: "a", Phase: rollout.PhaseReady}, {Cluster: "b", Phase: rollout.PhaseApplied}, {Cluster: "c", Phase: rollout.PhasePending}}},
			StatePending, "1/3 Ready; applying on b, c"},
		{"held at a wave", AppState{Application: "web", Rollout: rollout.ProgressPaused, Clusters: []ClusterState{
			{Cluster: "a", Phase: rollout.PhaseReady, Wave: "canary"}, {Cluster: "b", Phase: rollout.PhaseHeld, Wave: "rest"}}},
			StatePending, "1/2 Ready; held at wave rest (rollout paused)"},
		{"a cluster failed", AppState{Application: "web", Clusters: []ClusterState{
			{Cluster: "a", Phase: rollout.PhaseReady}, {Cluster: "b", Phase: rollout.PhaseFailed, Reason: "HealthCheckFailed: Deployment/web/web: Failed"}}},
			StateFailure, "failing on b (HealthCheckFailed: Deployment/web/web: Failed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(commit, tt.app, "https://dash.example")
			want := CommitStatus{Commit: commit, Context: "flotilla/web", State: tt.state, Description: tt.desc, TargetURL: "https://dash.example"}
			if got != want {
				t.Fatalf("Summarize:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

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

	gh, err := NewForge(ForgeOptions{Kind: ForgeGitHub, URL: srv.URL, Repo: "ops/fleet", Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if err := gh.SetStatus(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	gl, err := NewForge(ForgeOptions{Kind: ForgeGitLab, URL: srv.URL, Repo: "ops/fleet", Token: token})
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
	denied, _ := NewForge(ForgeOptions{Kind: ForgeGitea, URL: srv.URL, Repo: "ops/denied", Token: token})
	err = denied.SetStatus(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "not accessible") || strings.Contains(err.Error(), token) {
		t.Fatalf("refused request: %v", err)
	}
	if _, err := NewForge(ForgeOptions{Kind: "bitbucket", URL: srv.URL, Repo: "a/b", Token: token}); err == nil {
		t.Error("unknown forge accepted")
	}
}

// TestRecorderSendsOnce: two runs claiming the same statuses at once, over
// a real Git smart-HTTP server, send each once; a released claim is sent
// by the next run; a changed state is due again.
func TestRecorderSendsOnce(t *testing.T) {
	srv := gitserver.Start(t, gitserver.ForgeConfig())
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("fleet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url := srv.MustCreateRepo(t, "fleet", dir)
	newRec := func() *Recorder {
		return &Recorder{Remote: url, Auth: gitrepo.Auth{Username: gitserver.Maintainer, Password: srv.Password(gitserver.Maintainer)},
			Author: gitrepo.Signature{Name: "notify", Email: "notify@example.com"}}
	}
	statuses := []CommitStatus{
		{Commit: "c1", Context: "flotilla/web", State: StatePending, Description: "0/2 Ready"},
		{Commit: "c1", Context: "flotilla/db", State: StateSuccess, Description: "Ready on 1 cluster"},
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	claimed := make([][]CommitStatus, 4)
	errs := make([]error, 4)
	for i := range claimed {
		wg.Go(func() { claimed[i], errs[i] = newRec().Claim(ctx, statuses) })
	}
	wg.Wait()
	count := map[string]int{}
	for i := range claimed {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		for _, s := range claimed[i] {
			count[s.Context]++
		}
	}
	if count["flotilla/web"] != 1 || count["flotilla/db"] != 1 {
		t.Fatalf("claimed across 4 concurrent runs: %v, want each once", count)
	}
	if again, err := newRec().Claim(ctx, statuses); err != nil || len(again) != 0 {
		t.Fatalf("a later run claims %v, %v; want nothing", again, err)
	}
	if err := newRec().Release(ctx, statuses[0]); err != nil {
		t.Fatal(err)
	}
	web := statuses[0]
	web.State, web.Description = StateSuccess, "Ready on 2 clusters"
	again, err := newRec().Claim(ctx, []CommitStatus{statuses[0], statuses[1]})
	if err != nil || len(again) != 1 || again[0] != statuses[0] {
		t.Fatalf("after a release: %v, %v; want the released status again", again, err)
	}
	again, err = newRec().Claim(ctx, []CommitStatus{web, statuses[1]})
	if err != nil || len(again) != 1 || again[0] != web {
		t.Fatalf("after a change of state: %v, %v; want the new state", again, err)
	}
}
