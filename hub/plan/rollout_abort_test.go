package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/plan"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// TestPlanOfAnAbort: the plan of an abort names the unit each cluster the
// rollout changed goes back to.
func TestPlanOfAnAbort(t *testing.T) {
	r := newTestRepo(t, rolloutFleet())
	s, err := slice.Read(r.dir, "c1")
	if err != nil || len(s.Units) != 1 {
		t.Fatalf("c1's slice: %v %v", s, err)
	}
	blue := strings.TrimPrefix(s.Units[0].Hash, "sha256:")[:12]
	r.write(map[string]string{"apps/web/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: green\n"})
	r.render()
	r.commit("green")
	r.git("checkout", "-q", "-b", "abort")
	ctx := context.Background()
	repo, err := fleet.Load(ctx, r.dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := fleetrender.CommittedAt(r.dir).State("web")
	if err != nil || st == nil {
		t.Fatalf("state: %v %v", st, err)
	}
	st.Aborted = true
	out, err := fleetrender.Pipeline(ctx, repo, fleetrender.PipelineOptions{Rollout: &fleetrender.RolloutOptions{States: map[string]*rollout.State{"web": st}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleetrender.Write(ctx, r.dir, out, fleetrender.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.commit("abort")
	p := r.plan(plan.Options{Base: "change", Head: "abort", MaskKey: []byte("k")})
	if got := clusterNames(p); got != "c1" {
		t.Fatalf("clusters changed: %s, want c1", got)
	}
	if notes := strings.Join(p.Notes, "\n"); !strings.Contains(notes, "rollout web: ABORTED: clusters go back from revision ") ||
		!strings.Contains(notes, "to their last unit Ready there: c1 gets unit "+blue) {
		t.Errorf("notes do not say which unit c1 gets (%s): %q", blue, p.Notes)
	}
}
