package e2e_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/hub/plan"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/golden"
)

// planScenario is an edit of the fleet-repo-template: base edits are
// committed on main (with `flotilla render`), head edits on the branch
// "feature" on top of it.
type planScenario struct {
	name       string
	base, head map[string]string // path → content; "" deletes
	// edit changes head files in place (old → new in path).
	edit []planFileEdit
	// mustNotContain are strings no output may contain (Secret values).
	mustNotContain []string
}

type planFileEdit struct{ path, old, new string }

const planBackendSecretKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - deployment.yaml
  - secret.yaml
`

func planBackendSecret(password string) string {
	return `apiVersion: v1
kind: Secret
metadata:
  name: backend-db
type: Opaque
stringData:
  username: backend
  password: ` + password + `
data:
  token: c2VjcmV0LXRva2Vu
`
}

func planMigrateHook(version string) string {
	return `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: registry.example.com/backend-migrate:` + version + `
`
}

func planBackendKustomization(extra ...string) string {
	k := planBackendSecretKustomization[:strings.Index(planBackendSecretKustomization, "  - secret.yaml")]
	for _, e := range extra {
		k += "  - " + e + "\n"
	}
	return k
}

const planClusterRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: backend-reader
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get, list]
`

var planScenarios = []planScenario{
	{
		name: "values-change",
		edit: []planFileEdit{{"apps/redis-cache/app.yaml", "maxMemory: 64mb", "maxMemory: 128mb"}},
	},
	{
		name: "replica-redivision",
		edit: []planFileEdit{{"apps/nginx/app.yaml", "weight: 3", "weight: 1"}},
	},
	{
		// The edge override: one cluster scales, nothing moves.
		name: "replica-one-cluster",
		edit: []planFileEdit{{"apps/iot-collector/app.yaml", "count: 1", "count: 2"}},
	},
	{
		name: "app-added-to-fleet",
		edit: []planFileEdit{{"apps/redis-cache/app.yaml", "            type: cloud\n", "            type: cloud\n    - name: edge\n      destination:\n        fleet: edge\n"}},
	},
	{
		name: "app-removed",
		head: map[string]string{"apps/iot-collector": ""},
	},
	{
		name: "secret-change",
		base: map[string]string{
			"apps/backend/base/kustomization.yaml": planBackendSecretKustomization,
			"apps/backend/base/secret.yaml":        planBackendSecret("s3cr3t-before"),
		},
		head: map[string]string{
			"apps/backend/base/secret.yaml": planBackendSecret("s3cr3t-after"),
		},
		mustNotContain: []string{"s3cr3t", "c2VjcmV0LXRva2Vu", "secret-token"},
	},
	{
		// frontend-web-canary's only manifest holds no object at head and
		// the app has no allowEmpty: the agent refuses the empty render and
		// keeps what it applied, so the plan fails the unit instead of
		// listing its Deployment as removed. (An app with replica overrides
		// or patches, like nginx or backend, fails in kustomize first.)
		name: "empty-render-refused",
		head: map[string]string{"apps/frontend-web-canary/manifests/deployment.yaml": "# frontend-web v2 is retired.\n"},
	},
	{
		// A chart's migration hook changes: the plan lists it apart from
		// the unit's objects, saying when it runs.
		name: "helm-hook-change",
		base: map[string]string{"apps/backend-api/chart/templates/migrate-job.yaml": planMigrateHook("1")},
		head: map[string]string{"apps/backend-api/chart/templates/migrate-job.yaml": planMigrateHook("2")},
	},
	{
		// A refactor: the ClusterRole moves from backend to frontend-web,
		// which run together on member1 and member2.
		name: "object-moved",
		base: map[string]string{
			"apps/backend/base/kustomization.yaml": planBackendKustomization("clusterrole.yaml"),
			"apps/backend/base/clusterrole.yaml":   planClusterRole,
		},
		head: map[string]string{
			"apps/backend/base/kustomization.yaml":         planBackendKustomization(),
			"apps/backend/base/clusterrole.yaml":           "",
			"apps/frontend-web/manifests/clusterrole.yaml": planClusterRole,
		},
	},
	{
		// backend starts shipping its own Namespace, as app repos do; the
		// fleets declare it, so flotilla-namespaces keeps it and gains
		// the app's label.
		name: "namespace-shipped",
		head: map[string]string{
			"apps/backend/base/kustomization.yaml": planBackendKustomization("namespace.yaml"),
			"apps/backend/base/namespace.yaml": `apiVersion: v1
kind: Namespace
metadata:
  name: backend
  labels:
    team: backend
    pod-security.kubernetes.io/enforce: baseline
`,
		},
	},
	{
		name: "cluster-added",
		head: map[string]string{"clusters/member3.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: member3
  labels:
    env: staging
    region: us-west-2
    type: cloud
    provider: aws
spec:
  kubernetesVersion: v1.35.0
`},
	},
}

// TestPlanGolden plans each scenario over the fleet-repo-template and
// compares text, Markdown and JSON with testdata/plan/<scenario>.*
// (go test ./test/e2e -run TestPlanGolden -update rewrites them).
func TestPlanGolden(t *testing.T) {
	template := filepath.Join(agentproc.ModuleRoot(), "fleet-repo-template")
	for _, sc := range planScenarios {
		t.Run(sc.name, func(t *testing.T) {
			dir := t.TempDir()
			planCopyDir(t, template, dir)
			planGit(t, dir, "init", "-q", "-b", "main")
			planWriteFiles(t, dir, sc.base)
			planRenderCommit(t, dir, "base")
			planGit(t, dir, "checkout", "-q", "-b", "feature")
			planWriteFiles(t, dir, sc.head)
			for _, e := range sc.edit {
				p := filepath.Join(dir, filepath.FromSlash(e.path))
				old := planReadFile(t, p)
				if !strings.Contains(old, e.old) {
					t.Fatalf("%s has no %q: the template changed, update the scenario", e.path, e.old)
				}
				planWriteFiles(t, dir, map[string]string{e.path: strings.Replace(old, e.old, e.new, 1)})
			}
			planRenderCommit(t, dir, sc.name)

			p, err := plan.Compute(context.Background(), plan.Options{
				RepoDir: dir, Base: "main", Head: "feature", MaskKey: []byte("golden"),
			})
			if err != nil {
				t.Fatal(err)
			}
			if p.Empty() {
				t.Fatal("the plan is empty")
			}
			// Commit hashes change with any edit of the template; the golden
			// files hold fixed ones.
			if len(p.Base.Commit) != 40 || len(p.Head.Commit) != 40 {
				t.Fatalf("commits %q and %q", p.Base.Commit, p.Head.Commit)
			}
			p.Base.Commit, p.Head.Commit = strings.Repeat("1", 40), strings.Repeat("2", 40)
			if len(p.Warnings) > 0 {
				t.Errorf("warnings: %q", p.Warnings)
			}
			outputs := map[string]string{}
			for ext, format := range map[string]string{"txt": plan.FormatText, "md": plan.FormatMarkdown, "json": plan.FormatJSON} {
				var b bytes.Buffer
				if err := plan.Write(&b, p, format, plan.FormatOptions{}); err != nil {
					t.Fatal(err)
				}
				outputs[ext] = b.String()
				for _, secret := range sc.mustNotContain {
					if strings.Contains(b.String(), secret) {
						t.Errorf("%s output contains the Secret value %q", format, secret)
					}
				}
				golden.Assert(t, filepath.Join("testdata", "plan", sc.name+"."+ext), b.String())
			}
			checkPlanScenario(t, sc.name, dir, p, outputs)
		})
	}
}

// checkScenario asserts each scenario's point, so a wrong golden file
// cannot be accepted silently with -update.
func checkPlanScenario(t *testing.T, name, dir string, p *plan.Plan, out map[string]string) {
	t.Helper()
	clusters := map[string]*plan.ClusterPlan{}
	for i := range p.Clusters {
		clusters[p.Clusters[i].Name] = &p.Clusters[i]
	}
	has := func(s, sub string) {
		t.Helper()
		if !strings.Contains(s, sub) {
			t.Errorf("output lacks %q", sub)
		}
	}
	switch name {
	case "values-change":
		has(out["txt"], "-        - 64mb\n")
		has(out["txt"], "+        - 128mb\n")
		if len(p.Clusters) != 2 || clusters["edge-1"] != nil {
			t.Errorf("clusters %v, want member1 and member2 (redis-cache runs on cloud clusters)", planClusterNames(p))
		}
	case "helm-hook-change":
		has(out["txt"], "Helm hooks (run by the agent around the unit's apply, not kept as its objects):")
		has(out["txt"], "~ hook batch/v1 Job shop/backend-api-migrate (pre-install,pre-upgrade; weight 0; delete before-hook-creation)")
		has(out["md"], "# ~ batch/v1 Job shop/backend-api-migrate (pre-install,pre-upgrade; weight 0; delete before-hook-creation)")
		has(out["json"], `"hook": "pre-install,pre-upgrade; weight 0; delete before-hook-creation"`)
		for _, cp := range p.Clusters {
			if cp.Counts.ObjectsAdded+cp.Counts.ObjectsChanged+cp.Counts.ObjectsRemoved != 0 || len(cp.Units) != 1 || len(cp.Units[0].Hooks) != 1 {
				t.Errorf("cluster %s: %+v, want only backend-api's hook to change", cp.Name, cp)
			}
		}
	case "replica-redivision":
		want := "nginx: member1 3→2 replicas, member2 1→2"
		if len(p.Notes) != 1 || p.Notes[0] != want {
			t.Errorf("notes %q, want [%q]", p.Notes, want)
		}
		has(out["md"], want)
	case "replica-one-cluster":
		if len(p.Notes) != 0 || len(p.Clusters) != 1 || clusters["edge-1"] == nil {
			t.Errorf("notes %q on clusters %v, want no note and edge-1 only", p.Notes, planClusterNames(p))
		}
		for ext, s := range out {
			if strings.Contains(s, "Moves between clusters") {
				t.Errorf("%s output has a Moves section for a one-cluster scale", ext)
			}
		}
		has(out["txt"], "+  replicas: 2\n")
	case "app-added-to-fleet":
		c := clusters["edge-1"]
		if c == nil || len(p.Clusters) != 1 || c.Counts.UnitsAdded != 1 || c.Units[0].Name != "redis-cache" {
			t.Fatalf("want only redis-cache added on edge-1, got %+v", p.Summary)
		}
	case "app-removed":
		for _, c := range p.Clusters {
			if c.Counts.UnitsRemoved != 1 || c.Counts.UnitsAdded+c.Counts.UnitsChanged != 0 || c.Units[0].Name != "iot-collector" {
				t.Errorf("cluster %s: %+v, want iot-collector removed only", c.Name, c.Counts)
			}
		}
		if len(p.Clusters) != 3 {
			t.Errorf("clusters %v, want all three", planClusterNames(p))
		}
	case "secret-change":
		if p.Summary.ObjectsChanged != 2 || p.Summary.ObjectsAdded+p.Summary.ObjectsRemoved != 0 {
			t.Errorf("summary %+v, want the Secret changed on the two backend clusters", p.Summary)
		}
		has(out["txt"], "-  password: '<masked: sha256:")
		has(out["txt"], "+  password: '<masked: sha256:")
		has(out["json"], `"token": "<masked: sha256:`)
	case "empty-render-refused":
		const refused = "the agent refuses the unit and keeps what it applied"
		if !p.Failed {
			t.Error("an empty render without allowEmpty did not fail the plan")
		}
		if p.Summary.ObjectsRemoved+p.Summary.ObjectsAdded+p.Summary.ObjectsChanged != 0 || p.Summary.UnitsRemoved != 0 {
			t.Errorf("summary %+v, want no object listed (nothing is deleted)", p.Summary)
		}
		if len(p.Clusters) != 1 || clusters["member2"] == nil {
			t.Fatalf("clusters %v, want member2 only (the canary runs on staging)", planClusterNames(p))
		}
		c := clusters["member2"]
		if len(c.Units) != 1 || c.Units[0].Name != "frontend-web-canary" || c.Units[0].Change != plan.Changed ||
			!strings.Contains(c.Units[0].Error, refused) || len(c.Units[0].Objects) != 0 {
			t.Errorf("units %+v, want frontend-web-canary refused with no objects", c.Units)
		}
		for _, ext := range []string{"txt", "md"} {
			has(out[ext], refused)
			for _, removal := range []string{"Deployment", "frontend-web-v2"} {
				if strings.Contains(out[ext], removal) {
					t.Errorf("%s output names %s: nothing may be shown as removed", ext, removal)
				}
			}
		}
		// `flotilla plan` exits 2, as for any unit failing at head.
		if _, stderr, code := planCLI(t, "plan", "--repo", dir, "--base", "main", "--head", "feature"); code != hubcmd.ExitError {
			t.Errorf("flotilla plan: exit %d, want %d\n%s", code, hubcmd.ExitError, stderr)
		}
	case "object-moved":
		want := "ClusterRole backend-reader moves from unit backend to unit frontend-web: the agent hands it over without deleting it (clusters member1, member2)"
		if len(p.Ownership) != 1 || p.Ownership[0] != want {
			t.Errorf("ownership %q, want [%q]", p.Ownership, want)
		}
		has(out["txt"], "Ownership:\n  "+want)
		has(out["md"], want)
	case "namespace-shipped":
		// member1 gets the namespace from fleet production, member2 from dev.
		if len(p.Ownership) != 2 {
			t.Errorf("ownership %q, want the namespace merge on member1 and member2", p.Ownership)
		}
		for _, n := range p.Ownership {
			if !strings.Contains(n, "application backend ships Namespace backend, which fleet") || !strings.Contains(n, "the flotilla-namespaces unit owns it") {
				t.Errorf("ownership note %q, want the namespace merge", n)
			}
		}
		// backend's sources changed, so its agents re-apply it, but no
		// object of it does: its Namespace copy is left out.
		for _, c := range p.Clusters {
			for _, u := range c.Units {
				if u.Name == "backend" && (!u.InputsOnly || len(u.Objects) != 0) {
					t.Errorf("cluster %s: unit backend changed (%+v); its Namespace copy must be left out", c.Name, u.Objects)
				}
			}
		}
		has(out["txt"], "+    pod-security.kubernetes.io/enforce: baseline\n")
	case "cluster-added":
		c := clusters["member3"]
		if c == nil || len(p.Clusters) != 1 || c.Change != plan.Added || c.Counts.UnitsRemoved+c.Counts.UnitsChanged != 0 || c.Counts.UnitsAdded == 0 {
			t.Fatalf("want member3 added with only added units, got %v", planClusterNames(p))
		}
		if c.Capabilities.KubeVersion != "v1.35.0" || c.Capabilities.Source != plan.FromCluster {
			t.Errorf("capabilities %+v, want v1.35.0 from the Cluster file", c.Capabilities)
		}
	}
}

func planClusterNames(p *plan.Plan) []string {
	var out []string
	for _, c := range p.Clusters {
		out = append(out, c.Name)
	}
	return out
}
