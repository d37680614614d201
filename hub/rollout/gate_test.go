package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// readyFor is a unit Ready at the released content for d, and Ready (by
// its condition) for a day: a healthy cluster that got new content.
func readyFor(d time.Duration) status.UnitStatus {
	since := metav1.NewTime(now.Add(-d))
	return status.UnitStatus{Name: "web", Hash: "sha256:new", ReadyHash: "sha256:new", ReadySince: &since, ReadyHashes: []string{"sha256:new", "sha256:old"},
		Conditions: []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSucceeded, LastTransitionTime: metav1.NewTime(now.Add(-24 * time.Hour))}}}
}

// oldAgent is readyFor(d) as an agent without readiness fields reports
// it: only the condition, Ready for a day.
func oldAgent() status.UnitStatus {
	u := readyFor(time.Minute)
	u.ReadyHash, u.ReadySince, u.ReadyHashes = "", nil, nil
	return u
}

// readyAtOld is Ready, but its readiness is about the older content (the
// agent has not finished the cycle that applied the new one).
func readyAtOld() status.UnitStatus {
	u := readyFor(time.Hour)
	u.ReadyHash, u.ReadyHashes = "sha256:old", []string{"sha256:old"}
	return u
}

func failed() status.UnitStatus {
	return status.UnitStatus{Name: "web", Hash: "sha256:new", Conditions: []metav1.Condition{
		{Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: status.ReasonApplyFailed, Message: "admission denied"}}}
}

func doc(units ...status.UnitStatus) *status.ClusterStatus {
	return &status.ClusterStatus{Cluster: "x", Units: units}
}

// TestEvaluate: the next wave goes once the last released wave has been
// Ready for bake with failures within maxFailures; otherwise Blocked says
// why, naming the clusters.
func TestEvaluate(t *testing.T) {
	waves := []fleet.ResolvedWave{{Name: "canary", Clusters: []string{"a"}}, {Name: "empty"}, {Name: "main", Clusters: []string{"b", "c"}, MaxFailures: 1}, {Name: "rest", Clusters: []string{"d"}}}
	tests := []struct {
		name     string
		released int
		paused   bool
		docs     map[string]*status.ClusterStatus
		release  int
		blocked  string
		state    ProgressState
		passed   string
		phases   string
	}{
		{name: "ready and baked: the next non-empty wave goes", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Hour))}, release: 3, phases: "a=Ready b=Held c=Held d=Held",
			passed: "every cluster of wave canary Ready at the revision for at least 10m0s (bake): a (Ready at the revision for 1h0m0s, since 2026-12-03T11:00:00Z)"},
		{name: "still baking, although Ready by its condition for a day", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Minute))}, release: 1, state: ProgressBaking,
			blocked: "wave canary is baking: a (Ready at the revision for 1m0s of 10m0s, since 2026-12-03T11:59:00Z)"},
		{name: "an older agent's status holds the wave", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(oldAgent())}, release: 1,
			blocked: "wave canary is not Ready: a Applied: Ready, but its agent does not report since when at this content (status without readySince: upgrade the agent)"},
		{name: "readiness of the older content", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(readyAtOld())}, release: 1,
			blocked: "wave canary is not Ready: a Applied: applied, not reported Ready at the released content yet"},
		{name: "no status", released: 1, state: ProgressWaiting, release: 1, blocked: "wave canary is not Ready: a Pending: no status reported"},
		{name: "old revision", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(status.UnitStatus{Name: "web", Hash: "sha256:old"})}, release: 1, blocked: "a Pending: the agent reports old, not the released new"},
		{name: "suspended", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(status.UnitStatus{Name: "web", Suspended: true, Conditions: readyFor(time.Hour).Conditions})}, release: 1,
			blocked: "wave canary is not Ready: a Pending: suspended on this cluster: the agent does not apply it"},
		{name: "failed", released: 1, state: ProgressFailed, docs: map[string]*status.ClusterStatus{"a": doc(failed())}, release: 1, blocked: "wave canary has 1 Failed cluster(s), more than maxFailures 0: a (ApplyFailed: admission denied)"},
		{name: "failures within maxFailures", released: 3, docs: map[string]*status.ClusterStatus{"b": doc(failed()), "c": doc(readyFor(time.Hour))}, release: 4, phases: "a=Ready b=Failed c=Ready d=Held",
			passed: "wave main Ready at the revision for at least 10m0s (bake) but for 1 Failed (maxFailures 1): b (ApplyFailed: admission denied); Ready: c (Ready at the revision for 1h0m0s, since 2026-12-03T11:00:00Z)"},
		{name: "applied, not ready", released: 3, docs: map[string]*status.ClusterStatus{"b": doc(status.UnitStatus{Name: "web", Hash: "sha256:new"}), "c": doc(readyFor(time.Hour))}, release: 3, blocked: "b Applied: applied, not Ready yet"},
		{name: "paused", released: 1, paused: true, state: ProgressPaused, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Hour))}, release: 1, blocked: "paused"},
		{name: "complete", released: 4, state: ProgressComplete, release: 4, blocked: "complete"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &State{Application: "web", Revision: "sha256:rev", Released: tc.released, Waves: len(waves), Paused: tc.paused}
			observe := func(c string) ClusterProgress {
				if c == "a" && tc.released > 1 {
					return ClusterProgress{Cluster: c, Phase: PhaseReady}
				}
				return Observe(c, "web", "sha256:new", tc.docs[c], "")
			}
			p := Evaluate(st, waves, 10*time.Minute, observe, now)
			if p.Release != tc.release || !strings.Contains(p.Blocked, tc.blocked) || (tc.blocked == "" && p.Blocked != "") {
				t.Fatalf("release %d blocked %q; want %d %q", p.Release, p.Blocked, tc.release, tc.blocked)
			}
			if want := tc.state; want != "" && p.State != want || want == "" && tc.blocked == "" && p.State != ProgressReleasable {
				t.Errorf("state %s, want %s", p.State, want)
			}
			if !strings.Contains(p.Passed, tc.passed) {
				t.Errorf("passed %q, want %q", p.Passed, tc.passed)
			}
			if tc.phases != "" {
				var got []string
				for _, w := range p.Waves {
					for _, c := range w.Clusters {
						got = append(got, c.Cluster+"="+string(c.Phase))
					}
				}
				if strings.Join(got, " ") != tc.phases {
					t.Errorf("phases %s, want %s", strings.Join(got, " "), tc.phases)
				}
			}
		})
	}
}

// TestDueWithin: a rollout is due when advance may release a wave within
// the window: at once, when a cluster reports (unknown), or when the last
// Ready cluster's bake ends inside it; one that waits for a person never.
func TestDueWithin(t *testing.T) {
	waves := []fleet.ResolvedWave{{Name: "canary", Clusters: []string{"a", "b"}, MaxFailures: 1}, {Name: "rest", Clusters: []string{"c"}}}
	tests := []struct {
		name     string
		released int
		paused   bool
		aborted  bool
		docs     map[string]*status.ClusterStatus
		within   time.Duration
		state    ProgressState
		due      bool
	}{
		{name: "releasable", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Hour)), "b": doc(readyFor(time.Hour))}, state: ProgressReleasable, due: true},
		{name: "waiting for a report", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Hour))}, state: ProgressWaiting, due: true},
		{name: "bake ends inside the window", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Minute)), "b": doc(readyFor(5 * time.Minute))}, within: 15 * time.Minute, state: ProgressBaking, due: true},
		{name: "bake ends at the window's end", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Minute)), "b": doc(readyFor(5 * time.Minute))}, within: 9 * time.Minute, state: ProgressBaking, due: true},
		{name: "the last Ready cluster bakes past the window", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Minute)), "b": doc(readyFor(5 * time.Minute))}, within: 8 * time.Minute, state: ProgressBaking},
		{name: "a Failed cluster within maxFailures does not bake", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(failed()), "b": doc(readyFor(5 * time.Minute))}, within: 5 * time.Minute, state: ProgressBaking, due: true},
		{name: "failed", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(failed()), "b": doc(failed())}, within: time.Hour, state: ProgressFailed},
		{name: "paused", released: 1, paused: true, within: time.Hour, state: ProgressPaused},
		{name: "aborted", released: 1, aborted: true, within: time.Hour, state: ProgressAborted},
		{name: "complete", released: 2, within: time.Hour, state: ProgressComplete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &State{Application: "web", Revision: "sha256:rev", Released: tc.released, Waves: len(waves), Paused: tc.paused, Aborted: tc.aborted}
			observe := func(c string) ClusterProgress { return Observe(c, "web", "sha256:new", tc.docs[c], "") }
			p := Evaluate(st, waves, 10*time.Minute, observe, now)
			if p.State != tc.state {
				t.Fatalf("state %s, want %s (%s)", p.State, tc.state, p.Blocked)
			}
			if got := p.DueWithin(now, tc.within); got != tc.due {
				t.Errorf("due within %s: %v, want %v (baked at %s)", tc.within, got, tc.due, p.BakedAt())
			}
		})
	}
}
