package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/cijob"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// TestDefaultInstallFollowsPublishedSlices: three clusters, each with an
// agent process started with no transport flag (the default install), and
// the template's publish job (GitHub Actions, its shell as written, with
// this test binary as `flotilla`) run after every merge as the forge would.
// Before the first publish the agents follow the branch and warn that it
// grows with the fleet; from then on a merge reaches each of them through
// its own slice ref; a cluster removed from clusters/ loses its slice ref
// while the others carry on.
func TestDefaultInstallFollowsPublishedSlices(t *testing.T) {
	names := []string{"east", "west", "edge"}
	cs := testenv.StartClusters(t, len(names), testenv.ClusterOptions{Mode: testenv.Minimal})
	srv := newGitServer(t)
	dir := t.TempDir()
	files := map[string]string{
		"fleets/all.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: all\nspec:\n  clusters: [" + strings.Join(names, ", ") + "]\n  namespaces: [{name: web}]\n",
		"apps/web/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: web
spec:
  source: {manifests: {path: manifests}}
  namespace: web
  syncPolicies: [{destination: {fleet: all}}]
`,
		"apps/web/manifests/cm.yaml": waveConfigMap("web", "v1"),
	}
	for _, n := range names {
		files["clusters/"+n+".yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + n + "\n"
	}
	treefile.Write(t, dir, files)
	hubRender(t, dir)
	repo := fleetrepo.New(t, srv, "default-install", dir)
	publish := templatePublishJob(t, srv, repo.Name)

	agents := map[string]*agentProc{}
	for i, n := range names {
		const ns = "flotilla-system"
		if err := cs[i].CreateNamespace(testCtx(t), ns); err != nil {
			t.Fatal(err)
		}
		agents[n] = startAgentProc(t, cs[i], repo, n, ns, n+"-agent", t.TempDir(), agentUser(t, srv, n), "--interval", "2s")
	}
	converged := func(version string, onSlice bool, clusters ...string) {
		t.Helper()
		head := repo.Head()
		for _, n := range clusters {
			i := slices.Index(names, n)
			agents[n].waitStatus(3*time.Minute, n+" applying "+head, func(st *status.ClusterStatus) bool {
				return st.AppliedRevision == head
			})
			var cm corev1.ConfigMap
			if err := cs[i].Client().Get(testCtx(t), client.ObjectKey{Namespace: "web", Name: "web"}, &cm); err != nil || cm.Data["version"] != version {
				t.Fatalf("%s: ConfigMap web/web %v (%v), want version %s", n, cm.Data, err, version)
			}
			want := gitrepo.SliceRef(n)
			if !onSlice {
				want = "refs/heads/main"
			}
			if ref := agents[n].syncedRef(); ref != want {
				t.Fatalf("%s: the default install fetched %q, want %s:\n%s", n, ref, want, agents[n].LogTail(20))
			}
		}
	}
	// Before CI first publishes, the agents fetch the branch, and say
	// that this grows with the fleet.
	converged("v1", false, names...)
	for _, n := range names {
		if agents[n].Count("no slice ref published for this cluster: fetching the whole branch, which grows with the fleet; "+
			"run flotilla publish after every merge (the fleet repo template's flotilla-publish job)") != 1 {
			t.Errorf("%s: no warning (once) that it fetches the whole branch:\n%s", n, agents[n].LogTail(20))
		}
	}
	publish()

	// A merge, then the publish job the merge starts: from now on each
	// agent fetches its slice ref.
	repo.Write(t, "apps/web/manifests/cm.yaml", waveConfigMap("web", "v2"))
	hubRender(t, repo.Dir)
	repo.Push(t, "web v2")
	publish()
	converged("v2", true, names...)

	// edge is decommissioned: its agent is gone, its file removed.
	agents["edge"].kill()
	repo.Remove(t, "clusters/edge.yaml")
	repo.Edit(t, "fleets/all.yaml", "[east, west, edge]", "[east, west]")
	repo.Write(t, "apps/web/manifests/cm.yaml", waveConfigMap("web", "v3"))
	hubRender(t, repo.Dir)
	repo.Push(t, "edge leaves the fleet; web v3")
	publish()
	refs, err := srv.Refs(repo.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := refs[gitrepo.SliceRef("edge")]; ok {
		t.Errorf("the slice ref of edge, which left the fleet, is still published")
	}
	for _, n := range names[:2] {
		if _, ok := refs[gitrepo.SliceRef(n)]; !ok {
			t.Errorf("the slice ref of %s is gone", n)
		}
	}
	converged("v3", true, names[:2]...)
}

// templatePublishJob returns a function that runs the template's GitHub
// publish step as written, in a fresh shallow clone of main as a runner
// has, with the job token GitHub gives it (allowed to push slice refs).
func templatePublishJob(t *testing.T, srv *gitserver.Server, repo string) func() {
	t.Helper()
	const token = "publish-token"
	if err := srv.AddUser("x-access-token", token, gitserver.Rule{User: "x-access-token", Refs: []string{gitrepo.SliceRefPrefix + "*"}, Force: true}); err != nil {
		t.Fatal(err)
	}
	wf, script := templateStep(t, "flotilla-publish.yml", "publish", "Publish slices")
	_, env := runnerEnv(t, wf)
	env = append(env, "GIT_TOKEN="+token)
	return func() {
		t.Helper()
		clone := filepath.Join(t.TempDir(), "clone")
		if out, err := cijob.Run(context.Background(), "", "git clone -q --depth 1 --branch main "+srv.UserURL(repo, gitserver.Maintainer)+" "+clone, env); err != nil {
			t.Fatalf("clone: %v\n%s", err, out)
		}
		if out, err := cijob.Run(context.Background(), clone, script, env); err != nil {
			t.Fatalf("the template's publish job: %v\n%s", err, out)
		}
	}
}

// templateStep is a step of one of the template's GitHub workflows: the
// workflow and the step's script, as written.
func templateStep(t *testing.T, workflow, job, step string) (map[string]any, string) {
	t.Helper()
	wf, err := cijob.Load(filepath.Join(agentproc.ModuleRoot(), "fleet-repo-template", ".github/workflows", workflow))
	if err != nil {
		t.Fatal(err)
	}
	script, err := cijob.GitHubStep(wf, job, step)
	if err != nil {
		t.Fatal(err)
	}
	return wf, script
}

// runnerEnv is a runner's environment for a job of workflow wf: this test
// binary on PATH as flotilla (in bin, where a test may add other
// commands), the workflow's env, a HOME and Git configuration of its own.
func runnerEnv(t *testing.T, wf map[string]any) (bin string, env []string) {
	t.Helper()
	bin, cliEnv := cijob.CLIOnPath(t, "flotilla")
	env = append(append(os.Environ(), cliEnv...), cijob.GitHubEnv(wf)...)
	return bin, append(env, "HOME="+t.TempDir(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
}

// syncedRef is the ref of the agent's last Git sync (its debug log).
func (p *agentProc) syncedRef() string {
	recs := p.Records("git sync")
	if len(recs) == 0 {
		return ""
	}
	ref, _ := recs[len(recs)-1]["ref"].(string)
	return ref
}
