package notify

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

func TestSummarize(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name  string
		app   AppState
		state forge.State
		desc  string
	}{
		{"every cluster Ready", AppState{Application: "web", Clusters: []ClusterState{
			{Cluster: "a", Phase: rollout.PhaseReady}, {Cluster: "b", Phase: rollout.PhaseReady}}},
			forge.StateSuccess, "Ready on 2 clusters"},
		{"applying", AppState{Application: "web", Clusters: []ClusterState{
			{Cluster: "a", Phase: rollout.PhaseReady}, {Cluster: "b", Phase: rollout.PhaseApplied}, {Cluster: "c", Phase: rollout.PhasePending}}},
			forge.StatePending, "1/3 Ready; applying on b, c"},
		{"held at a wave", AppState{Application: "web", Rollout: rollout.ProgressPaused, Clusters: []ClusterState{
			{Cluster: "a", Phase: rollout.PhaseReady, Wave: "canary"}, {Cluster: "b", Phase: rollout.PhaseHeld, Wave: "rest"}}},
			forge.StatePending, "1/2 Ready; held at wave rest (rollout paused)"},
		{"a cluster failed", AppState{Application: "web", Clusters: []ClusterState{
			{Cluster: "a", Phase: rollout.PhaseReady}, {Cluster: "b", Phase: rollout.PhaseFailed, Reason: "HealthCheckFailed: Deployment/web/web: Failed"}}},
			forge.StateFailure, "failing on b: HealthCheckFailed: Deployment/web/web: Failed"},
		{"two failed, the rollout held", AppState{Application: "web", Rollout: rollout.ProgressFailed, Clusters: []ClusterState{
			{Cluster: "a", Phase: rollout.PhaseFailed, Reason: "ApplyFailed: x", Wave: "canary"}, {Cluster: "b", Phase: rollout.PhaseFailed, Reason: "HealthCheckFailed: y", Wave: "canary"},
			{Cluster: "c", Phase: rollout.PhaseHeld, Wave: "rest"}}},
			forge.StateFailure, "failing on a, b; held at wave rest (rollout failed): a: ApplyFailed: x; b: HealthCheckFailed: y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(commit, tt.app, "https://dash.example")
			want := forge.CommitStatus{Commit: commit, Context: "flotilla/web", State: tt.state, Description: tt.desc, TargetURL: "https://dash.example"}
			if got != want {
				t.Fatalf("Summarize:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// recorderOn returns new Recorders of one fleet repo on a real Git
// smart-HTTP server: a run of notify each.
func recorderOn(t *testing.T) func() *Recorder {
	t.Helper()
	srv := gitserver.Start(t, gitserver.ForgeConfig())
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("fleet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url := srv.MustCreateRepo(t, "fleet", dir)
	return func() *Recorder {
		return &Recorder{Remote: url, Auth: gitrepo.Auth{Username: gitserver.Maintainer, Password: srv.Password(gitserver.Maintainer)},
			Author: gitrepo.Signature{Name: "notify", Email: "notify@example.com"}}
	}
}

// TestRecorderSendsOnce: two runs claiming the same statuses at once, over
// a real Git smart-HTTP server, send each once; a released claim is sent
// by the next run; a changed state is due again.
func TestRecorderSendsOnce(t *testing.T) {
	newRec := recorderOn(t)
	statuses := []forge.CommitStatus{
		{Commit: "c1", Context: "flotilla/web", State: forge.StatePending, Description: "0/2 Ready"},
		{Commit: "c1", Context: "flotilla/db", State: forge.StateSuccess, Description: "Ready on 1 cluster"},
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	claimed := make([][]forge.CommitStatus, 4)
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
	web.State, web.Description = forge.StateSuccess, "Ready on 2 clusters"
	again, err := newRec().Claim(ctx, []forge.CommitStatus{statuses[0], statuses[1]})
	if err != nil || len(again) != 1 || again[0] != statuses[0] {
		t.Fatalf("after a release: %v, %v; want the released status again", again, err)
	}
	again, err = newRec().Claim(ctx, []forge.CommitStatus{web, statuses[1]})
	if err != nil || len(again) != 1 || again[0] != web {
		t.Fatalf("after a change of state: %v, %v; want the new state", again, err)
	}
}

// TestClaimEventsAtMostMaxPerRun: a run claims at most max events per
// provider and records only those (and what tells nothing); the next run
// claims the rest; a released event is claimed again; a run after that
// claims nothing.
func TestClaimEventsAtMostMaxPerRun(t *testing.T) {
	newRec := recorderOn(t)
	ctx := context.Background()
	routes := []Route{{Provider: &fleet.Provider{Metadata: fleet.ObjectMeta{Name: "ops"}}, Alerts: []*fleet.Alert{{}}}}
	// The provider's first run: nothing to tell of healthy clusters.
	healthy := []Fact{
		{Subject: "cluster/a", Value: clusterOK, Event: &Event{}, AfterChange: true},
		{Subject: "cluster/b", Value: clusterOK, Event: &Event{}, AfterChange: true},
		{Subject: "cluster/c", Value: clusterOK, Event: &Event{}, AfterChange: true},
	}
	if due, err := newRec().ClaimEvents(ctx, routes, healthy, 2); err != nil || len(due) != 0 {
		t.Fatalf("first run: %v, %v; want nothing due", due, err)
	}
	failing := make([]Fact, len(healthy))
	for i, f := range healthy {
		failing[i] = Fact{Subject: f.Subject, Value: "Failing", Event: &Event{Reason: "Failing"}}
	}
	first, err := newRec().ClaimEvents(ctx, routes, failing, 2)
	if err != nil || len(first) != 2 {
		t.Fatalf("three clusters failing, max 2: %v, %v", first, err)
	}
	second, err := newRec().ClaimEvents(ctx, routes, failing, 2)
	if err != nil || len(second) != 1 || second[0].Fact.Subject != "cluster/c" {
		t.Fatalf("the next run: %v, %v; want cluster/c", second, err)
	}
	if err := newRec().ReleaseEvents(ctx, second); err != nil {
		t.Fatal(err)
	}
	again, err := newRec().ClaimEvents(ctx, routes, failing, 2)
	if err != nil || len(again) != 1 || again[0].Fact.Subject != "cluster/c" {
		t.Fatalf("after a release: %v, %v; want cluster/c again", again, err)
	}
	if none, err := newRec().ClaimEvents(ctx, routes, failing, 2); err != nil || len(none) != 0 {
		t.Fatalf("a run after every event was told: %v, %v", none, err)
	}
}
