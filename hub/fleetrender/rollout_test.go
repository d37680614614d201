package fleetrender_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// rolloutFleet has four clusters; web rolls out to a1, then b2 and c3,
// then the rest (d4).
const rolloutFleet = `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: prod
spec:
  clusters: [a1, b2, c3, d4]
  rollout:
    bake: 1m
    waves:
      - name: canary
        clusters: [a1]
      - clusters: [b2, c3]
`

const webApp = `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: web
spec:
  source:
    kustomize:
      path: overlay
  syncPolicies:
    - destination: {fleet: prod}
`

func rolloutRepo(t *testing.T, withRollout bool) string {
	root := t.TempDir()
	files := map[string]string{
		"apps/web/app.yaml":                   webApp,
		"apps/web/overlay/kustomization.yaml": "resources: [../base]\n",
		"apps/web/base/kustomization.yaml":    "resources: [cm.yaml]\n",
		"fleets/prod.yaml":                    rolloutFleet,
	}
	if !withRollout {
		files["fleets/prod.yaml"] = rolloutFleet[:strings.Index(rolloutFleet, "  rollout:")]
	}
	for _, c := range []string{"a1", "b2", "c3", "d4"} {
		files["clusters/"+c+".yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + c + "\n"
	}
	treefile.Write(t, root, files)
	setVersion(t, root, "v1")
	return root
}

func setVersion(t *testing.T, root, v string) {
	treefile.Write(t, root, map[string]string{"apps/web/base/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {version: " + v + "}\n"})
}

// renderRollout compiles with the committed tree under root (states
// replaced by states, when given) and writes rendered/.
func renderRollout(t *testing.T, root string, states map[string]*rollout.State) (*fleetrender.Output, fleetrender.Changes) {
	t.Helper()
	out, err := renderRolloutErr(root, states)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := fleetrender.Write(context.Background(), root, out, fleetrender.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Every unit must pass the agent's own check of its checkout.
	h := slice.NewTreeHasher(root)
	for _, co := range out.Clusters {
		for _, u := range co.Slice.Units {
			if err := slice.CheckHash(h, u); err != nil {
				t.Fatalf("agent check of %s: %v", co.Slice.Cluster, err)
			}
		}
	}
	return out, ch
}

func renderRolloutErr(root string, states map[string]*rollout.State) (*fleetrender.Output, error) {
	ctx := context.Background()
	repo, err := fleet.Load(ctx, root)
	if err != nil {
		return nil, err
	}
	return fleetrender.Compile(ctx, repo, fleetrender.Options{Rollout: &fleetrender.RolloutOptions{Committed: fleetrender.CommittedAt(root), States: states}})
}

// versions renders web on every cluster and returns cluster=version.
func versions(t *testing.T, root string, out *fleetrender.Output) string {
	t.Helper()
	var parts []string
	for _, c := range []string{"a1", "b2", "c3", "d4"} {
		y := unitObjects(t, root, out, c, "web")
		_, v, _ := strings.Cut(y, "version: ")
		parts = append(parts, c+"="+strings.TrimSpace(strings.SplitN(v, "\n", 2)[0]))
	}
	return strings.Join(parts, " ")
}

func clusterFiles(t *testing.T, root, cluster string) map[string]string {
	t.Helper()
	files, err := fleetrender.CommittedAt(root).Files(slice.ClusterDir(cluster))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[f.Path] = string(f.Data)
	}
	return out
}

func snapshots(t *testing.T, root string) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(fleetrender.SnapshotDir)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return len(entries)
}

func state(t *testing.T, root string) *rollout.State {
	t.Helper()
	s, err := fleetrender.CommittedAt(root).State("web")
	if err != nil || s == nil {
		t.Fatalf("state of web: %v %v", s, err)
	}
	return s
}

func released(s *rollout.State, n int) map[string]*rollout.State {
	cp := *s
	cp.Released = n
	return map[string]*rollout.State{"web": &cp}
}

// TestRolloutHoldsLaterWaves walks a rollout through the compiler: only
// released waves get a change; held clusters keep their files byte for
// byte and render the previous objects; a change during a rollout
// restarts at wave 1 while clusters on an intermediate revision stay
// there; snapshots nobody references are removed.
func TestRolloutHoldsLaterWaves(t *testing.T) {
	root := rolloutRepo(t, true)
	out, _ := renderRollout(t, root, nil)
	if got := versions(t, root, out); got != "a1=v1 b2=v1 c3=v1 d4=v1" {
		t.Fatalf("first deployment: %s", got)
	}
	if s := state(t, root); s.Released != 3 || s.Waves != 3 {
		t.Fatalf("first deployment releases every wave: %+v", s)
	}
	kust := clusterFiles(t, root, "a1")[slice.UnitDir("a1", "web")+"/kustomization.yaml"]
	if !strings.Contains(kust, "../../../../"+fleetrender.SnapshotDir+"/") {
		t.Fatalf("the unit does not read its snapshot:\n%s", kust)
	}
	if n := snapshots(t, root); n != 1 {
		t.Fatalf("%d snapshots, want 1", n)
	}
	before := map[string]map[string]string{}
	for _, c := range []string{"b2", "c3", "d4"} {
		before[c] = clusterFiles(t, root, c)
	}

	setVersion(t, root, "v2")
	out, _ = renderRollout(t, root, nil)
	if got := versions(t, root, out); got != "a1=v2 b2=v1 c3=v1 d4=v1" {
		t.Fatalf("after the change: %s", got)
	}
	for c, files := range before {
		if got := clusterFiles(t, root, c); !equalMaps(got, files) {
			t.Errorf("held cluster %s's files changed", c)
		}
	}
	s := state(t, root)
	if s.Released != 1 || !strings.Contains(s.Reason, "wave canary released") {
		t.Fatalf("state after the change: %+v", s)
	}
	if n := snapshots(t, root); n != 2 {
		t.Fatalf("%d snapshots, want 2 (v1 held, v2 released)", n)
	}
	if _, ch := renderRollout(t, root, nil); !ch.Empty() {
		t.Fatalf("a second render changed %v", ch.All())
	}

	out, _ = renderRollout(t, root, released(s, 2))
	if got := versions(t, root, out); got != "a1=v2 b2=v2 c3=v2 d4=v1" {
		t.Fatalf("wave 2 released: %s", got)
	}

	setVersion(t, root, "v3")
	out, _ = renderRollout(t, root, nil)
	if got := versions(t, root, out); got != "a1=v3 b2=v2 c3=v2 d4=v1" {
		t.Fatalf("a change during the rollout: %s", got)
	}
	s = state(t, root)
	if s.Released != 1 || !strings.Contains(s.Reason, "which had reached 2 of 3 waves") {
		t.Fatalf("state after the second change: %+v", s)
	}
	if n := snapshots(t, root); n != 3 {
		t.Fatalf("%d snapshots, want 3", n)
	}

	aborted := *s
	aborted.Aborted = true
	out, _ = renderRollout(t, root, map[string]*rollout.State{"web": &aborted})
	if got := versions(t, root, out); got != "a1=v2 b2=v2 c3=v2 d4=v1" {
		t.Fatalf("abort gives every cluster what it had when the rollout of v3 started: %s", got)
	}
	if _, ch := renderRollout(t, root, nil); !ch.Empty() {
		t.Fatalf("a render after abort changed %v", ch.All())
	}

	out, _ = renderRollout(t, root, released(s, 3))
	if got := versions(t, root, out); got != "a1=v3 b2=v3 c3=v3 d4=v3" {
		t.Fatalf("every wave released: %s", got)
	}
	if n := snapshots(t, root); n != 1 {
		t.Fatalf("%d snapshots after the rollout, want 1 (the others unreferenced)", n)
	}
}

// TestRolloutAdoption: a rollout declared on an application already
// deployed holds nothing back when nothing changed; a change in the same
// render as the declaration cannot be held and is refused.
func TestRolloutAdoption(t *testing.T) {
	root := rolloutRepo(t, false)
	renderRollout(t, root, nil)
	treefile.Write(t, root, map[string]string{"fleets/prod.yaml": rolloutFleet})
	setVersion(t, root, "v2")
	_, err := renderRolloutErr(root, nil)
	if !errors.Is(err, fleetrender.ErrCannotHold) {
		t.Fatalf("want ErrCannotHold, got %v", err)
	}
	if !strings.Contains(err.Error(), "apps/web/app.yaml") || !strings.Contains(err.Error(), "--all-waves") {
		t.Errorf("error does not say where and what to do: %v", err)
	}

	setVersion(t, root, "v1")
	out, _ := renderRollout(t, root, nil)
	if got := versions(t, root, out); got != "a1=v1 b2=v1 c3=v1 d4=v1" {
		t.Fatalf("adoption: %s", got)
	}
	setVersion(t, root, "v2")
	out, _ = renderRollout(t, root, nil)
	if got := versions(t, root, out); got != "a1=v2 b2=v1 c3=v1 d4=v1" {
		t.Fatalf("the first change after adoption: %s", got)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

// TestRolloutHelmChartSnapshot: a chart in the repo is snapshot too; a
// held cluster renders the previous chart from its snapshot.
func TestRolloutHelmChartSnapshot(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"fleets/prod.yaml":                 rolloutFleet,
		"apps/web/app.yaml":                "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n  source:\n    helm:\n      path: chart\n      values: {version: v1}\n  syncPolicies:\n    - destination: {fleet: prod}\n",
		"apps/web/chart/Chart.yaml":        "apiVersion: v2\nname: web\nversion: 1.0.0\n",
		"apps/web/chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {version: {{ .Values.version }}, chart: one}\n",
	}
	for _, c := range []string{"a1", "b2", "c3", "d4"} {
		files["clusters/"+c+".yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + c + "\n"
	}
	treefile.Write(t, root, files)
	renderRollout(t, root, nil)
	treefile.Write(t, root, map[string]string{
		"apps/web/chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {version: {{ .Values.version }}, chart: two}\n",
	})
	out, _ := renderRollout(t, root, nil)
	for cluster, want := range map[string]string{"a1": "chart: two", "b2": "chart: one", "d4": "chart: one"} {
		if got := unitObjects(t, root, out, cluster, "web"); !strings.Contains(got, want) {
			t.Errorf("%s renders\n%s\nwant %s", cluster, got, want)
		}
	}
	for _, co := range out.Clusters {
		for _, u := range co.Slice.Units {
			if u.Name == "web" && !strings.HasPrefix(u.Helm.Chart, fleetrender.SnapshotDir+"/") {
				t.Errorf("%s's chart is %s, not in a snapshot", co.Slice.Cluster, u.Helm.Chart)
			}
		}
	}
}
