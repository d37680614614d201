package plan_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/plan"
	"github.com/flotilla-gitops/flotilla/test/golden"
)

// rolloutFleet: web rolls out to c1, then c2 and c3, then c4.
func rolloutFleet() map[string]string {
	files := map[string]string{
		"fleets/a.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: a\nspec:\n  clusters: [c1, c2, c3, c4]\n" +
			"  rollout:\n    bake: 30m\n    waves:\n      - {name: canary, clusters: [c1]}\n      - {name: early, clusters: [c2, c3]}\n",
		"apps/web/app.yaml":          "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n  source: {manifests: {path: manifests}}\n  namespace: web\n  syncPolicies: [{destination: {fleet: a}}]\n",
		"apps/web/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: blue\n",
	}
	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		files["clusters/"+c+".yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + c + "\n"
	}
	return files
}

// TestPlanUnderRollout: a pull request changing an application under a
// rollout plans the change on wave 1's cluster only and names the held
// clusters (text and Markdown goldens); --all-waves is named loudly.
func TestPlanUnderRollout(t *testing.T) {
	// Fixed dates make the commit hashes, and so the goldens, stable.
	t.Setenv("GIT_AUTHOR_DATE", "2026-12-03T00:00:00Z")
	t.Setenv("GIT_COMMITTER_DATE", "2026-12-03T00:00:00Z")
	r := newTestRepo(t, rolloutFleet())
	r.write(map[string]string{"apps/web/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: green\n"})
	r.render()
	r.commit("green")
	p := r.plan(plan.Options{Head: "change", MaskKey: []byte("k")})
	if got := clusterNames(p); got != "c1" {
		t.Fatalf("clusters changed: %s, want c1 only", got)
	}
	if len(p.Warnings) != 0 {
		t.Fatalf("warnings: %q", p.Warnings)
	}
	var text bytes.Buffer
	if err := plan.WriteText(&text, p, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "held for later waves: c2, c3, c4") {
		t.Errorf("text plan does not name the held clusters:\n%s", text.String())
	}
	golden.Assert(t, filepath.Join("testdata", "rollout.txt"), text.String())
	golden.Assert(t, filepath.Join("testdata", "rollout.md"), plan.Markdown(p, 0))

	r.write(map[string]string{"apps/web/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: red\n"})
	ctx := context.Background()
	repo, err := fleet.Load(ctx, r.dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := fleetrender.Pipeline(ctx, repo, fleetrender.PipelineOptions{Rollout: &fleetrender.RolloutOptions{AllWaves: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleetrender.Write(ctx, r.dir, out, fleetrender.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	p = r.plan(plan.Options{MaskKey: []byte("k")})
	if got := clusterNames(p); got != "c1,c2,c3,c4" {
		t.Fatalf("--all-waves changes %s, want every cluster", got)
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "rollout web: ALL WAVES AT ONCE (render --all-waves)") {
		t.Errorf("notes do not name --all-waves: %q", p.Notes)
	}
}
