package plan_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/plan"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/test/golden"
	"github.com/flotilla-gitops/flotilla/test/sopscli"
)

// A small fleet: c1 and c2 in fleet "a", c3 in fleet "b"; "web" (plain
// manifests) runs on fleet a, "chart" (an in-repo Helm chart that prints
// .Capabilities.KubeVersion) everywhere.
var smallFleet = map[string]string{
	"clusters/c1.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: c1\n  labels: {env: a}\nspec:\n  kubernetesVersion: v1.30.1\n",
	"clusters/c2.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: c2\n  labels: {env: a}\n",
	"clusters/c3.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: c3\n  labels: {env: b}\n",
	"fleets/a.yaml":    "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: a\nspec:\n  selector:\n    matchLabels: {env: a}\n",
	"fleets/b.yaml":    "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: b\nspec:\n  selector:\n    matchLabels: {env: b}\n",
	"apps/web/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: web
spec:
  source:
    manifests:
      path: manifests
  namespace: web
  syncPolicies:
    - name: a
      destination:
        fleet: a
`,
	"apps/web/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: blue\n",
	"apps/chart/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: chart
spec:
  source:
    helm:
      path: chart
  namespace: tools
  syncPolicies:
    - name: all
      destination:
        selector:
          matchExpressions:
            - {key: env, operator: Exists}
`,
	"apps/chart/chart/Chart.yaml":               "apiVersion: v2\nname: chart\nversion: 1.0.0\n",
	"apps/chart/chart/templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n",
}

type testRepo struct {
	t   *testing.T
	dir string
}

func newTestRepo(t *testing.T, files map[string]string) *testRepo {
	t.Helper()
	r := &testRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.write(files)
	r.render()
	r.commit("base")
	r.git("checkout", "-q", "-b", "change") // main stays the base
	return r
}

func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// write writes files ("" deletes).
func (r *testRepo) write(files map[string]string) {
	r.t.Helper()
	for p, c := range files {
		full := filepath.Join(r.dir, filepath.FromSlash(p))
		if c == "" {
			os.RemoveAll(full)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

// render does what `flotilla render` does for a repo without chart
// repositories: the same pipeline, with the repo's own status refs.
func (r *testRepo) render() {
	r.t.Helper()
	ctx := context.Background()
	repo, err := fleet.Load(ctx, r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	out, err := fleetrender.Pipeline(ctx, repo, fleetrender.PipelineOptions{StatusRepo: fleetrender.DefaultStatusRepo(r.dir)})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := fleetrender.Write(ctx, r.dir, out, fleetrender.WriteOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *testRepo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

func (r *testRepo) plan(opts plan.Options) *plan.Plan {
	r.t.Helper()
	opts.RepoDir = r.dir
	if opts.Base == "" {
		opts.Base = "main"
	}
	opts.HelmInProcess = true
	p, err := plan.Compute(context.Background(), opts)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

func clusterNames(p *plan.Plan) string {
	var out []string
	for _, c := range p.Clusters {
		out = append(out, c.Name)
	}
	return strings.Join(out, ",")
}

func TestNoChangeIsAnEmptyPlan(t *testing.T) {
	r := newTestRepo(t, smallFleet)
	p := r.plan(plan.Options{Head: "main"})
	if !p.Empty() || p.Stats.UnitsRendered != 0 || p.Stats.UnitsCompared != 5 || len(p.Warnings) != 0 {
		t.Errorf("plan of main against itself: %d clusters, stats %+v, warnings %q", len(p.Clusters), p.Stats, p.Warnings)
	}
}

func TestWorkingTreeAndStaleRendered(t *testing.T) {
	r := newTestRepo(t, smallFleet)
	r.write(map[string]string{"apps/web/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: green\n"})

	// The working tree, not rendered: the change shows (compiled from the
	// inputs), with a warning that rendered/ is stale.
	p := r.plan(plan.Options{})
	if p.Head.Ref != plan.WorkingTree || clusterNames(p) != "c1,c2" || p.Summary.ObjectsChanged != 2 {
		t.Fatalf("working tree plan: head %+v, clusters %s, summary %+v", p.Head, clusterNames(p), p.Summary)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "rendered/ at head is stale") {
		t.Errorf("warnings %q", p.Warnings)
	}
	d := p.Clusters[0].Units[0].Objects[0].Diff
	if !strings.Contains(d, "-  color: blue\n+  color: green\n") {
		t.Errorf("diff:\n%s", d)
	}

	// Committed without rendering: the same warning for a commit.
	r.commit("unrendered")
	if p := r.plan(plan.Options{Head: "HEAD"}); len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "stale: 2 files differ") {
		t.Errorf("warnings %q", p.Warnings)
	}
	// Rendered and committed: no warning; the working tree is untouched.
	r.render()
	r.commit("rendered")
	if p := r.plan(plan.Options{Head: "HEAD"}); len(p.Warnings) != 0 || p.Summary.ObjectsChanged != 2 {
		t.Errorf("warnings %q, summary %+v", p.Warnings, p.Summary)
	}
	if status := r.git("status", "--porcelain"); status != "" {
		t.Errorf("plan changed the working tree:\n%s", status)
	}
}

func TestFilters(t *testing.T) {
	r := newTestRepo(t, smallFleet)
	// A change for every cluster: the chart's template.
	r.write(map[string]string{"apps/chart/chart/templates/configmap.yaml": strings.Replace(smallFleet["apps/chart/chart/templates/configmap.yaml"], "kube:", "kubernetes:", 1)})
	for _, tc := range []struct {
		clusters, fleets []string
		want             string
	}{
		{nil, nil, "c1,c2,c3"},
		{[]string{"c2"}, nil, "c2"},
		{nil, []string{"b"}, "c3"},
		{[]string{"c1"}, []string{"b"}, "c1,c3"},
	} {
		p := r.plan(plan.Options{Clusters: tc.clusters, Fleets: tc.fleets})
		if got := clusterNames(p); got != tc.want {
			t.Errorf("--cluster %v --fleet %v: clusters %s, want %s", tc.clusters, tc.fleets, got, tc.want)
		}
	}
	_, err := plan.Compute(context.Background(), plan.Options{RepoDir: r.dir, Base: "main", Clusters: []string{"nope"}})
	if !errors.Is(err, plan.ErrUnknownCluster) {
		t.Errorf("unknown cluster: %v", err)
	}
	_, err = plan.Compute(context.Background(), plan.Options{RepoDir: r.dir, Base: "main", Fleets: []string{"nope"}})
	if !errors.Is(err, plan.ErrUnknownFleet) {
		t.Errorf("unknown fleet: %v", err)
	}
	_, err = plan.Compute(context.Background(), plan.Options{RepoDir: t.TempDir(), Base: "main"})
	if !errors.Is(err, plan.ErrNotGitRepo) {
		t.Errorf("not a repository: %v", err)
	}
}

func TestCapabilitiesFromStatus(t *testing.T) {
	r := newTestRepo(t, smallFleet)
	status := func(cluster, version string) string {
		return "apiVersion: flotilla.dev/v1alpha1\nkind: ClusterStatus\ncluster: " + cluster + "\nagent:\n  version: test\nkubernetesVersion: " + version + "\napiVersions: [v1, apps/v1]\nheartbeat: \"2025-01-01T00:00:00Z\"\n"
	}
	// c1 reports v1.34.2 on its status ref; c2's status commit also
	// touches another file, so it is not believed; c3 has none.
	r.git("checkout", "-q", "--orphan", "flotilla/status/c1")
	r.git("rm", "-rq", "--cached", ".")
	r.git("clean", "-fdq")
	r.write(map[string]string{"status.yaml": status("c1", "v1.34.2")})
	r.git("add", "status.yaml")
	r.git("commit", "-q", "-m", "status")
	r.git("checkout", "-q", "--orphan", "flotilla/status/c2")
	r.write(map[string]string{"status.yaml": status("c2", "v1.20.0"), "evil.yaml": "x: 1\n"})
	r.git("add", "status.yaml", "evil.yaml")
	r.git("commit", "-q", "-m", "status")
	r.git("checkout", "-q", "-f", "change")
	r.git("clean", "-fdq")

	// A change to the chart's template renders it on every cluster.
	r.write(map[string]string{"apps/chart/chart/templates/configmap.yaml": strings.Replace(smallFleet["apps/chart/chart/templates/configmap.yaml"], "kube:", "kubernetes:", 1)})
	p := r.plan(plan.Options{})
	got := map[string]string{}
	for _, c := range p.Clusters {
		got[c.Name] = c.Capabilities.Source + " " + c.Capabilities.KubeVersion
		for _, u := range c.Units {
			for _, o := range u.Objects {
				if o.After != nil && o.Name == "caps" {
					kube, _ := o.After.Object["data"].(map[string]any)["kubernetes"].(string)
					if kube != c.Capabilities.KubeVersion {
						t.Errorf("%s: the chart saw %q, capabilities say %q", c.Name, kube, c.Capabilities.KubeVersion)
					}
				}
			}
		}
	}
	want := map[string]string{"c1": "status v1.34.2", "c2": "default " + render.DefaultKubeVersion, "c3": "default " + render.DefaultKubeVersion}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: capabilities %q, want %q", k, got[k], v)
		}
	}
	var statusWarnings []string
	for _, w := range p.Warnings {
		if strings.Contains(w, "status document") {
			statusWarnings = append(statusWarnings, w)
		}
	}
	if len(statusWarnings) != 1 || !strings.Contains(statusWarnings[0], "cluster c2: status document") || !strings.Contains(statusWarnings[0], "evil.yaml") {
		t.Errorf("warnings %q", p.Warnings)
	}
}

func TestUnitChangesAndFailures(t *testing.T) {
	r := newTestRepo(t, smallFleet)
	// web: prune off (a settings change, same objects); chart: a template
	// that does not parse (fails at head); c3 leaves the repo.
	r.write(map[string]string{
		"apps/web/app.yaml":                         strings.Replace(smallFleet["apps/web/app.yaml"], "  namespace: web\n", "  namespace: web\n  prune: false\n", 1),
		"apps/chart/chart/templates/configmap.yaml": "{{ .Broken\n",
		"clusters/c3.yaml":                          "",
	})
	p := r.plan(plan.Options{})
	if !p.Failed {
		t.Error("a unit failing to render at head did not fail the plan")
	}
	byCluster := map[string]plan.ClusterPlan{}
	for _, c := range p.Clusters {
		byCluster[c.Name] = c
	}
	c1 := byCluster["c1"]
	var web, chart *plan.UnitPlan
	for i := range c1.Units {
		switch c1.Units[i].Name {
		case "web":
			web = &c1.Units[i]
		case "chart":
			chart = &c1.Units[i]
		}
	}
	if web == nil || len(web.Objects) != 0 || strings.Join(web.Settings, ";") != "prune: true → false" {
		t.Errorf("web: %+v", web)
	}
	if chart == nil || chart.Error == "" || !strings.Contains(chart.Error, "helm") {
		t.Errorf("chart: %+v", chart)
	}
	c3 := byCluster["c3"]
	if c3.Change != plan.Removed || c3.Counts.UnitsRemoved != 1 {
		t.Errorf("c3: %+v", c3)
	}
	found := false
	for _, w := range p.Warnings {
		found = found || strings.Contains(w, "cluster c3 leaves the fleet repo")
	}
	if !found {
		t.Errorf("warnings %q", p.Warnings)
	}
}

// An empty render at head is refused by the agent unless the unit has
// allowEmpty (it keeps what it applied), so the plan fails the unit and
// lists no removals; with allowEmpty the agent prunes everything the unit
// owns, and the plan lists those removals without failing.
func TestEmptyRenderAndAllowEmpty(t *testing.T) {
	const refused = "renders no objects and allowEmpty is not set: the agent refuses the unit and keeps what it applied"
	emptied := map[string]string{"apps/web/manifests/cm.yaml": "# web is retired.\n"}

	t.Run("refused without allowEmpty", func(t *testing.T) {
		r := newTestRepo(t, smallFleet)
		r.write(emptied)
		p := r.plan(plan.Options{})
		if !p.Failed {
			t.Error("an empty render without allowEmpty did not fail the plan")
		}
		if clusterNames(p) != "c1,c2" {
			t.Fatalf("clusters %s, want c1,c2 (web runs on fleet a)", clusterNames(p))
		}
		if p.Summary.ObjectsRemoved != 0 || p.Summary.UnitsRemoved != 0 || p.Summary.UnitsChanged != 2 {
			t.Errorf("summary %+v, want web changed on two clusters and nothing removed", p.Summary)
		}
		for _, c := range p.Clusters {
			if len(c.Units) != 1 {
				t.Errorf("%s: units %+v, want web only", c.Name, c.Units)
				continue
			}
			u := c.Units[0]
			if u.Name != "web" || u.Change != plan.Changed || u.Error != refused || len(u.Objects) != 0 {
				t.Errorf("%s: unit %+v, want web refused with no objects", c.Name, u)
			}
		}
	})

	t.Run("removals with allowEmpty", func(t *testing.T) {
		r := newTestRepo(t, smallFleet)
		r.write(emptied)
		r.write(map[string]string{"apps/web/app.yaml": strings.Replace(smallFleet["apps/web/app.yaml"], "  namespace: web\n", "  namespace: web\n  allowEmpty: true\n", 1)})
		p := r.plan(plan.Options{})
		if p.Failed {
			t.Error("an empty render with allowEmpty failed the plan")
		}
		if clusterNames(p) != "c1,c2" {
			t.Fatalf("clusters %s, want c1,c2 (web runs on fleet a)", clusterNames(p))
		}
		if p.Summary.ObjectsRemoved != 2 || p.Summary.ObjectsAdded+p.Summary.ObjectsChanged != 0 {
			t.Errorf("summary %+v, want web's ConfigMap removed on two clusters", p.Summary)
		}
		for _, c := range p.Clusters {
			if len(c.Units) != 1 {
				t.Errorf("%s: units %+v, want web only", c.Name, c.Units)
				continue
			}
			u := c.Units[0]
			if u.Name != "web" || u.Error != "" || strings.Join(u.Settings, ";") != "allowEmpty: false → true" {
				t.Errorf("%s: unit %+v, want web with allowEmpty turned on and no error", c.Name, u)
			}
			if len(u.Objects) != 1 || u.Objects[0].Change != plan.Removed || u.Objects[0].Kind != "ConfigMap" || u.Objects[0].Name != "web" {
				t.Errorf("%s: objects %+v, want the ConfigMap web removed", c.Name, u.Objects)
			}
		}
	})
}

// TestSOPSSecretInPlan: the hub has no key. A Secret SOPS-encrypted in an
// application's sources renders redacted; re-encrypting it with a new
// value shows in the plan as a changed Secret whose values are ciphertext
// markers, in every output format, and never as a plaintext.
func TestSOPSSecretInPlan(t *testing.T) {
	sopscli.Require(t)
	recipient := sopscli.NewKey(t).Recipient
	const before, after = "old-plaintext-Jq7Xc2", "new-plaintext-Pw9Lm4"
	encrypt := func(v string) string {
		return string(sopscli.Encrypt(t, "db.enc.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+v+"\n"),
			sopscli.Options{EncryptedRegex: "^(data|stringData)$"}, recipient))
	}
	files := maps.Clone(smallFleet)
	files["apps/web/manifests/db.enc.yaml"] = encrypt(before)
	r := newTestRepo(t, files)
	r.write(map[string]string{"apps/web/manifests/db.enc.yaml": encrypt(after)})
	r.render()

	p := r.plan(plan.Options{MaskKey: []byte("k")})
	var db *plan.ObjectPlan
	for _, c := range p.Clusters {
		for _, u := range c.Units {
			for i, o := range u.Objects {
				if u.Name == "web" && o.Kind == "Secret" && o.Name == "db" && c.Name == "c1" {
					db = &u.Objects[i]
				}
			}
		}
	}
	if db == nil || db.Change != plan.Changed {
		t.Fatalf("Secret db is not in the plan as changed: %+v", db)
	}
	if !strings.Contains(db.Diff, "-  password: <sops-encrypted:sha256:") || !strings.Contains(db.Diff, "+  password: <sops-encrypted:sha256:") {
		t.Errorf("the diff does not show the encrypted value as changed:\n%s", db.Diff)
	}
	var out strings.Builder
	for _, format := range []string{"text", "markdown", "json"} {
		if err := plan.Write(&out, p, format, plan.FormatOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{before, after, "ENC[AES256_GCM"} {
		if strings.Contains(out.String(), s) {
			t.Errorf("the plan output contains %q", s)
		}
	}
	// rendered/ holds the file as it is in the sources: ciphertext.
	err := filepath.WalkDir(filepath.Join(r.dir, "rendered"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if strings.Contains(string(data), before) || strings.Contains(string(data), after) {
			t.Errorf("%s holds a plaintext", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUndeclaredNamespace: a change that sends an application to a
// namespace nothing creates on its clusters makes the plan say that the
// apply will fail there, naming the file and line.
func TestUndeclaredNamespace(t *testing.T) {
	r := newTestRepo(t, smallFleet)
	r.write(map[string]string{"apps/web/app.yaml": strings.Replace(smallFleet["apps/web/app.yaml"], "namespace: web", "namespace: shop", 1)})
	p := r.plan(plan.Options{})
	want := "the apply will fail: apps/web/app.yaml:9: spec.namespace: namespace declared by no fleet: application web puts objects in namespace shop"
	var found []string
	for _, w := range p.Warnings {
		if strings.HasPrefix(w, want) {
			found = append(found, w)
		}
	}
	if len(found) != 1 || !strings.HasSuffix(found[0], "(clusters c1, c2)") {
		t.Fatalf("warnings %q, want one starting %q for clusters c1, c2", p.Warnings, want)
	}
	var text strings.Builder
	if err := plan.WriteText(&text, p, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), want) {
		t.Errorf("text plan does not say it:\n%s", text.String())
	}
	// Declared by the fleet: nothing to say.
	r.write(map[string]string{"fleets/a.yaml": smallFleet["fleets/a.yaml"] + "  namespaces: [{name: shop}]\n"})
	for _, w := range r.plan(plan.Options{}).Warnings {
		if strings.Contains(w, "apply will fail") {
			t.Errorf("warning %q after the fleet declares the namespace", w)
		}
	}
}

// TestSuspendedInPlan: suspending an application shows as a settings
// change of its units, marks them Suspended, and a note names the
// clusters; a change to a suspended application is still shown, marked.
func TestSuspendedInPlan(t *testing.T) {
	r := newTestRepo(t, smallFleet)
	r.write(map[string]string{"apps/web/app.yaml": strings.Replace(smallFleet["apps/web/app.yaml"], "  namespace: web\n", "  namespace: web\n  suspend: true\n", 1)})
	r.render()
	r.commit("suspend web")
	p := r.plan(plan.Options{Base: "HEAD~1", Head: "HEAD"})
	if clusterNames(p) != "c1,c2" {
		t.Fatalf("clusters %s, want c1,c2", clusterNames(p))
	}
	for _, cp := range p.Clusters {
		if len(cp.Units) != 1 || !cp.Units[0].Suspended || strings.Join(cp.Units[0].Settings, ";") != "suspend: false → true" {
			t.Errorf("%s: units %+v, want web suspended with the settings change", cp.Name, cp.Units)
		}
	}
	note := "web is Suspended on 2 clusters c1, c2: the agent leaves this unit as it is (nothing applied or pruned) until it is unsuspended."
	if !slices.Contains(p.Notes, note) {
		t.Errorf("notes %q, want %q", p.Notes, note)
	}
	// A change while suspended: shown, and marked.
	r.write(map[string]string{"apps/web/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: green\n"})
	p = r.plan(plan.Options{Base: "HEAD"})
	var text strings.Builder
	if err := plan.WriteText(&text, p, false); err != nil {
		t.Fatal(err)
	}
	if p.Summary.ObjectsChanged != 2 || !strings.Contains(text.String(), "Suspended: the agent leaves this unit as it is") || !strings.Contains(text.String(), "+  color: green") {
		t.Errorf("summary %+v; text:\n%s", p.Summary, text.String())
	}
}

// TestInputsOnlyChange: a change of a unit's inputs that changes none of
// its objects (here a comment) still changes its content hash, so the
// agent renders and applies it again: the plan lists the unit as changed
// and says why, in text, Markdown and JSON, and is not empty (exit 1).
func TestInputsOnlyChange(t *testing.T) {
	// Fixed dates make the commit hashes, and so the goldens, stable.
	t.Setenv("GIT_AUTHOR_DATE", "2026-12-03T00:00:00Z")
	t.Setenv("GIT_COMMITTER_DATE", "2026-12-03T00:00:00Z")
	r := newTestRepo(t, smallFleet)
	r.write(map[string]string{"apps/web/manifests/cm.yaml": "# the colour of the page\n" + smallFleet["apps/web/manifests/cm.yaml"]})
	r.render()
	r.commit("a comment")
	p := r.plan(plan.Options{Head: "change", MaskKey: []byte("k")})
	if p.Empty() || clusterNames(p) != "c1,c2" || p.Summary.UnitsChanged != 2 || p.Summary.ObjectsChanged != 0 {
		t.Fatalf("plan: clusters %q, summary %+v", clusterNames(p), p.Summary)
	}
	for _, c := range p.Clusters {
		u := c.Units[0]
		if len(c.Units) != 1 || u.Name != "web" || u.Change != plan.Changed || !u.InputsOnly || len(u.Objects) != 0 ||
			u.BaseHash == u.HeadHash || len(u.Reencrypted) != 0 {
			t.Errorf("cluster %s: units %+v", c.Name, c.Units)
		}
	}
	var text, js bytes.Buffer
	if err := plan.WriteText(&text, p, false); err != nil {
		t.Fatal(err)
	}
	if err := plan.WriteJSON(&js, p); err != nil {
		t.Fatal(err)
	}
	golden.Assert(t, filepath.Join("testdata", "inputs-only.txt"), text.String())
	golden.Assert(t, filepath.Join("testdata", "inputs-only.md"), plan.Markdown(p, 0))
	golden.Assert(t, filepath.Join("testdata", "inputs-only.json"), js.String())
}

// TestReKeyedSOPSFileInPlan: `sops updatekeys` gives a file new recipients
// and keeps its encrypted values, so the hub renders the same objects; the
// unit's hash changes and its agents re-render it, so the plan lists the
// unit as changed, naming the re-keyed file.
func TestReKeyedSOPSFileInPlan(t *testing.T) {
	sopscli.Require(t)
	k1, k2, k3 := sopscli.NewKey(t), sopscli.NewKey(t), sopscli.NewKey(t)
	const secret = "plaintext-Vb4Rt8"
	files := maps.Clone(smallFleet)
	files["apps/web/manifests/db.enc.yaml"] = string(sopscli.Encrypt(t, "db.enc.yaml",
		[]byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+secret+"\n"),
		sopscli.Options{EncryptedRegex: "^(data|stringData)$"}, k1.Recipient, k2.Recipient))
	r := newTestRepo(t, files)
	rekeyed := sopscli.UpdateKeys(t, "db.enc.yaml", []byte(files["apps/web/manifests/db.enc.yaml"]), k1.File, k1.Recipient, k3.Recipient)
	if string(rekeyed) == files["apps/web/manifests/db.enc.yaml"] {
		t.Fatal("sops updatekeys changed nothing")
	}
	r.write(map[string]string{"apps/web/manifests/db.enc.yaml": string(rekeyed)})
	r.render()

	p := r.plan(plan.Options{MaskKey: []byte("k")})
	if p.Empty() || clusterNames(p) != "c1,c2" || p.Summary.UnitsChanged != 2 || p.Summary.ObjectsChanged != 0 {
		t.Fatalf("plan: clusters %q, summary %+v", clusterNames(p), p.Summary)
	}
	const file = "apps/web/manifests/db.enc.yaml"
	for _, c := range p.Clusters {
		if u := c.Units[0]; len(c.Units) != 1 || u.Name != "web" || !u.InputsOnly || !slices.Equal(u.Reencrypted, []string{file}) {
			t.Errorf("cluster %s: units %+v", c.Name, c.Units)
		}
	}
	for _, format := range []string{"text", "markdown", "json"} {
		var out strings.Builder
		if err := plan.Write(&out, p, format, plan.FormatOptions{}); err != nil {
			t.Fatal(err)
		}
		wants := []string{"SOPS files re-keyed or re-encrypted, their encrypted values unchanged (" + file + ")"}
		if format == "json" {
			wants = []string{`"inputsOnly": true`, `"reencrypted": [`, `"` + file + `"`}
		}
		for _, want := range wants {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s plan does not say %q:\n%s", format, want, out.String())
			}
		}
		if strings.Contains(out.String(), secret) || strings.Contains(out.String(), "ENC[AES256_GCM") {
			t.Errorf("%s plan holds the plaintext or ciphertext", format)
		}
	}
}

// TestGeneratedSecretOverSOPSInPlan: a secretGenerator over an encrypted
// .env file is hashed by kustomize from the plaintext on the cluster, so
// the plan names it, and the Deployment's reference to it,
// "<name>-<hash decided on the cluster>", never the hub's own hash of the
// redaction markers; a changed value shows as a change of that Secret.
func TestGeneratedSecretOverSOPSInPlan(t *testing.T) {
	sopscli.Require(t)
	k := sopscli.NewKey(t)
	env := func(v string) string {
		return string(sopscli.Encrypt(t, "db.env", []byte("PASSWORD="+v+"\n"), sopscli.Options{}, k.Recipient))
	}
	files := maps.Clone(smallFleet)
	files["apps/web/app.yaml"] = strings.Replace(files["apps/web/app.yaml"], "    manifests:\n      path: manifests\n", "    kustomize:\n      path: base\n", 1)
	files["apps/web/base/kustomization.yaml"] = "resources: [deployment.yaml]\nsecretGenerator:\n- name: db\n  envs: [db.env]\n"
	files["apps/web/base/deployment.yaml"] = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: web:1
        envFrom:
        - secretRef: {name: db}
`
	files["apps/web/base/db.env"] = env("before-Kx81")
	r := newTestRepo(t, files)
	r.write(map[string]string{
		"apps/web/base/db.env":          env("after-Lw27"),
		"apps/web/base/deployment.yaml": strings.Replace(files["apps/web/base/deployment.yaml"], "web:1", "web:2", 1),
	})
	r.render()

	p := r.plan(plan.Options{MaskKey: []byte("k")})
	const name = "db-" + render.ClusterHash
	for _, c := range p.Clusters {
		var ids []string
		for _, u := range c.Units {
			for _, o := range u.Objects {
				ids = append(ids, string(o.Change)+" "+o.ID())
				if o.Kind == "Deployment" && !regexp.MustCompile(`secretRef:\n\s+name: `+regexp.QuoteMeta(name)+`\n`).MatchString(o.Diff) {
					t.Errorf("cluster %s: the Deployment does not refer to %s:\n%s", c.Name, name, o.Diff)
				}
			}
		}
		want := []string{"changed Secret web/" + name, "changed Deployment web/web"}
		if !slices.Equal(ids, want) {
			t.Errorf("cluster %s: objects %q, want %q", c.Name, ids, want)
		}
	}
	if len(p.Clusters) != 2 {
		t.Errorf("clusters %q, want c1 and c2", clusterNames(p))
	}
}
