package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func readyFor(d time.Duration) status.UnitStatus {
	return status.UnitStatus{Name: "web", Hash: "sha256:new", Conditions: []metav1.Condition{
		{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSucceeded, LastTransitionTime: metav1.NewTime(now.Add(-d))}}}
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
		phases   string
	}{
		{name: "ready and baked: the next non-empty wave goes", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Hour))}, release: 3, phases: "a=Ready b=Held c=Held d=Held"},
		{name: "still baking", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Minute))}, release: 1, blocked: "wave canary is baking: a (Ready for 1m0s of 10m0s)"},
		{name: "no status", released: 1, release: 1, blocked: "wave canary is not Ready: a Pending: no status reported"},
		{name: "old revision", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(status.UnitStatus{Name: "web", Hash: "sha256:old"})}, release: 1, blocked: "a Pending: the agent reports old, not the released new"},
		{name: "suspended", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(status.UnitStatus{Name: "web", Suspended: true, Conditions: readyFor(time.Hour).Conditions})}, release: 1,
			blocked: "wave canary is not Ready: a Pending: suspended on this cluster: the agent does not apply it"},
		{name: "failed", released: 1, docs: map[string]*status.ClusterStatus{"a": doc(failed())}, release: 1, blocked: "wave canary has 1 Failed cluster(s), more than maxFailures 0: a (ApplyFailed: admission denied)"},
		{name: "failures within maxFailures", released: 3, docs: map[string]*status.ClusterStatus{"b": doc(failed()), "c": doc(readyFor(time.Hour))}, release: 4, phases: "a=Ready b=Failed c=Ready d=Held"},
		{name: "applied, not ready", released: 3, docs: map[string]*status.ClusterStatus{"b": doc(status.UnitStatus{Name: "web", Hash: "sha256:new"}), "c": doc(readyFor(time.Hour))}, release: 3, blocked: "b Applied: applied, not Ready yet"},
		{name: "paused", released: 1, paused: true, docs: map[string]*status.ClusterStatus{"a": doc(readyFor(time.Hour))}, release: 1, blocked: "paused"},
		{name: "complete", released: 4, release: 4, blocked: "complete"},
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
