package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

const waveRepo = "waves"

var waveClusters = []string{"a1", "b2", "c3", "d4"}

// waveFiles: web rolls out to a1, then b2 and c3, then d4 (the fleet's
// rollout); api has its own rollout, d4 first.
func waveFiles() map[string]string {
	files := map[string]string{
		"fleets/prod.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: prod
spec:
  clusters: [a1, b2, c3, d4]
  namespaces: [{name: web}]
  rollout:
    bake: 2s
    waves:
      - {name: canary, clusters: [a1]}
      - {name: early, clusters: [b2, c3]}
`,
		"apps/web/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: web
spec:
  source: {manifests: {path: manifests}}
  namespace: web
  timeout: 15s
  syncPolicies: [{destination: {fleet: prod}}]
`,
		"apps/web/manifests/cm.yaml": waveConfigMap("web", "v1"),
		"apps/api/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: api
spec:
  source: {manifests: {path: manifests}}
  namespace: web
  syncPolicies: [{destination: {fleet: prod}}]
  rollout:
    waves: [{name: last-first, clusters: [d4]}]
`,
		"apps/api/manifests/cm.yaml": waveConfigMap("api", "v1"),
	}
	for _, c := range waveClusters {
		files["clusters/"+c+".yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + c + "\n"
	}
	return files
}

func waveConfigMap(name, version string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  version: " + version + "\n"
}

type waveAgent struct {
	name    string
	cluster *testenv.Cluster
	loop    *reconcile.Loop
}

// startWaveAgent runs an agent for cluster name in process, committing its
// status to the Git server as the binary does.
func startWaveAgent(t *testing.T, r *fleetrepo.Repo, name string, c *testenv.Cluster) *waveAgent {
	t.Helper()
	auth, err := gitrepo.LoadAuth(agentUser(t, r.Server, name))
	if err != nil {
		t.Fatal(err)
	}
	return startAgentOn(t, r.URL, auth, name, c)
}

// startAgentOn runs an agent for cluster name in process on the fleet repo
// at url (any Git server: ours, Gitea), committing its status there as
// the binary does.
func startAgentOn(t *testing.T, url string, auth gitrepo.Auth, name string, c *testenv.Cluster) *waveAgent {
	t.Helper()
	w, err := statuswriter.NewWriter(statuswriter.WriterOptions{
		Cluster: name, URL: url, Auth: auth, Timeout: 20 * time.Second,
		RetryBackoff: gitrepo.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.RESTConfig()
	ag := agentproc.NewInProcess(t, c, agentproc.InProcessOptions{
		Cluster: name, RepoURL: url, Auth: auth, Namespace: "flotilla-system", RESTConfig: cfg,
		Sink: w, Alongside: []func(context.Context) error{w.Run},
		Interval: 2 * time.Second, FetchTimeout: 20 * time.Second, Identity: name + "-agent",
	})
	ag.Start()
	return &waveAgent{name: name, cluster: c, loop: ag.Loop}
}

// liveVersion is the version a live ConfigMap holds, with the time the
// agent last applied it (from its managed fields).
func (a *waveAgent) liveVersion(t *testing.T, cm string) (string, time.Time) {
	t.Helper()
	var obj corev1.ConfigMap
	err := a.cluster.Client().Get(context.Background(), client.ObjectKey{Namespace: "web", Name: cm}, &obj)
	if apierrors.IsNotFound(err) {
		return "", time.Time{}
	}
	if err != nil {
		t.Fatal(err)
	}
	var at time.Time
	for _, mf := range obj.ManagedFields {
		if mf.Time != nil && mf.Time.After(at) {
			at = mf.Time.Time
		}
	}
	return obj.Data["version"], at
}

// waitFetched waits until the agent has fetched head, so that what it runs
// afterwards is its answer to head.
func (a *waveAgent) waitFetched(t *testing.T, head string) {
	t.Helper()
	waitFor(t, 90*time.Second, a.name+" fetched "+head, func() (bool, string) {
		st := a.loop.Status()
		if st == nil {
			return false, "no status"
		}
		return st.FetchedRevision == head, describeStatus(st)
	})
}

func (a *waveAgent) waitVersion(t *testing.T, cm, version string) time.Time {
	t.Helper()
	var at time.Time
	waitFor(t, 90*time.Second, fmt.Sprintf("%s: ConfigMap %s at %s", a.name, cm, version), func() (bool, string) {
		v, when := a.liveVersion(t, cm)
		at = when
		return v == version, "live version " + v
	})
	return at
}

// hubRun runs a flotilla command and returns its output and exit code.
func hubRun(t *testing.T, args ...string) (string, int) {
	t.Helper()
	stdout, stderr, code := planCLI(t, args...)
	return stdout + stderr, code
}

// advanceWhenReady waits until rollout status says the next wave of every
// app may go (the agents report at their own pace), then runs rollout
// advance once.
func advanceWhenReady(t *testing.T, r *fleetrepo.Repo, apps ...string) string {
	t.Helper()
	for _, app := range apps {
		waitFor(t, 3*time.Minute, app+"'s next wave to be releasable", func() (bool, string) {
			p := waveProgress(t, r, app)
			return p.Release > p.Released, p.Blocked
		})
	}
	out, code := hubRun(t, "rollout", "advance", "--repo", r.Dir, "--status-repo", r.Server.RepoPath(waveRepo))
	if code != 0 {
		t.Fatalf("rollout advance: exit %d\n%s", code, out)
	}
	return out
}

func waveProgress(t *testing.T, r *fleetrepo.Repo, app string) rollout.Progress {
	t.Helper()
	out, code := hubRun(t, "rollout", "status", app, "--repo", r.Dir, "--status-repo", r.Server.RepoPath(waveRepo), "-o", "json")
	var ps []rollout.Progress
	if code != 0 || json.Unmarshal([]byte(out), &ps) != nil || len(ps) != 1 {
		t.Fatalf("rollout status %s: exit %d\n%s", app, code, out)
	}
	return ps[0]
}

// TestRolloutWaves: four clusters, three waves, real agents reporting
// through Git. A good change reaches wave 1's live objects only, then
// wave 2 and 3 as rollout advance releases them; a second application
// with other waves rolls out alongside without interference; a change
// that fails to apply and one that never becomes Ready stop at wave 1
// (advance exits 1 and says why) and abort returns wave 1 to the previous
// content, Ready again.
func TestRolloutWaves(t *testing.T) {
	cs := testenv.StartClusters(t, 4, testenv.ClusterOptions{Mode: testenv.Minimal})
	srv := newGitServer(t)
	dir := t.TempDir()
	treefile.Write(t, dir, waveFiles())
	hubRender(t, dir)
	repo := fleetrepo.New(t, srv, waveRepo, dir)
	agents := map[string]*waveAgent{}
	for i, name := range waveClusters {
		agents[name] = startWaveAgent(t, repo, name, cs[i])
	}
	for _, name := range waveClusters {
		agents[name].waitVersion(t, "web", "v1")
		agents[name].waitVersion(t, "api", "v1")
	}

	// A good change to both applications.
	repo.Write(t, "apps/web/manifests/cm.yaml", waveConfigMap("web", "v2"))
	repo.Write(t, "apps/api/manifests/cm.yaml", waveConfigMap("api", "v2"))
	hubRender(t, repo.Dir)
	head := repo.Push(t, "web v2, api v2")
	applied := map[string]time.Time{}
	applied["a1"] = agents["a1"].waitVersion(t, "web", "v2")
	agents["d4"].waitVersion(t, "api", "v2")
	for _, name := range waveClusters {
		agents[name].waitFetched(t, head)
	}
	for _, name := range []string{"b2", "c3", "d4"} {
		if v, _ := agents[name].liveVersion(t, "web"); v != "v1" {
			t.Fatalf("web on %s is %s before its wave is released", name, v)
		}
	}
	for _, name := range []string{"a1", "b2", "c3"} {
		if v, _ := agents[name].liveVersion(t, "api"); v != "v1" {
			t.Fatalf("api on %s is %s before its wave is released", name, v)
		}
	}

	out := advanceWhenReady(t, repo, "web", "api")
	if !strings.Contains(out, "web: rollout advance: wave early released: every cluster of wave canary Ready at the revision for at least 2s (bake)") ||
		!strings.Contains(out, "api: rollout advance: wave rest released") {
		t.Fatalf("advance released the wrong waves:\n%s", out)
	}
	head = repo.Push(t, out)
	applied["b2"] = agents["b2"].waitVersion(t, "web", "v2")
	applied["c3"] = agents["c3"].waitVersion(t, "web", "v2")
	for _, name := range []string{"a1", "b2", "c3"} {
		agents[name].waitVersion(t, "api", "v2")
	}
	agents["d4"].waitFetched(t, head)
	if v, _ := agents["d4"].liveVersion(t, "web"); v != "v1" {
		t.Fatalf("web on d4 is %s before the last wave", v)
	}
	// flotilla status rollout shows the waves too, from a local clone.
	clone := filepath.Join(t.TempDir(), "fleet")
	if out, err := exec.Command("git", "clone", "-q", repo.Server.RepoPath(repo.Name), clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if out, code := hubRun(t, "status", "rollout", "--repo", clone, "--status-repo", repo.Server.RepoPath(waveRepo)); code != 0 ||
		!strings.Contains(out, "Waves (flotilla rollout status):") || !regexp.MustCompile(`(?m)^rest\s+d4\s+Held\b`).MatchString(out) {
		t.Errorf("status rollout: exit %d, want the waves with d4 held:\n%s", code, out)
	}

	out = advanceWhenReady(t, repo, "web")
	if !strings.Contains(out, "web: rollout advance: wave rest released: every cluster of wave early Ready") || !strings.Contains(out, "api: complete") {
		t.Fatalf("second advance:\n%s", out)
	}
	repo.Push(t, out)
	applied["d4"] = agents["d4"].waitVersion(t, "web", "v2")
	if applied["a1"].After(applied["b2"]) || applied["a1"].After(applied["c3"]) || applied["b2"].After(applied["d4"]) || applied["c3"].After(applied["d4"]) {
		t.Errorf("apply times out of wave order: %v", applied)
	}
	t.Logf("web v2 applied (server time): a1 %s, b2 %s, c3 %s, d4 %s", applied["a1"].Format(time.RFC3339),
		applied["b2"].Format(time.RFC3339), applied["c3"].Format(time.RFC3339), applied["d4"].Format(time.RFC3339))

	for _, bad := range []struct {
		name, file, content, phase string
	}{
		// The API server rejects it: a Service port out of range.
		{"fails to apply", "apps/web/manifests/svc.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports: [{port: 99999}]\n", "Failed"},
		// Nothing makes it available (no controllers in these clusters).
		{"never Ready", "apps/web/manifests/deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: example.invalid/web:never}]}\n", ""},
	} {
		t.Run(bad.name, func(t *testing.T) {
			repo.Write(t, bad.file, bad.content)
			repo.Write(t, "apps/web/manifests/cm.yaml", waveConfigMap("web", "v3-"+strings.ReplaceAll(bad.name, " ", "-")))
			hubRender(t, repo.Dir)
			head := repo.Push(t, "bad change: "+bad.name)
			waitFor(t, 2*time.Minute, "a1 to report the bad revision not Ready", func() (bool, string) {
				p := waveProgress(t, repo, "web")
				c := p.Waves[0].Clusters[0]
				if bad.phase != "" {
					return string(c.Phase) == bad.phase, fmt.Sprintf("%+v", c)
				}
				return c.Phase == rollout.PhaseFailed || c.Phase == rollout.PhaseApplied, fmt.Sprintf("%+v", c)
			})
			if bad.phase == "" {
				if err := agents["a1"].cluster.Client().Get(context.Background(), client.ObjectKey{Namespace: "web", Name: "web"}, &appsv1.Deployment{}); err != nil {
					t.Fatalf("a1 does not run the never-Ready Deployment: %v", err)
				}
			}
			for _, name := range []string{"b2", "c3", "d4"} {
				agents[name].waitFetched(t, head)
			}
			out, code := hubRun(t, "rollout", "advance", "--repo", repo.Dir, "--status-repo", srv.RepoPath(waveRepo))
			if code != 1 || !strings.Contains(out, "web: wave canary ") || !strings.Contains(out, "a1") {
				t.Fatalf("advance over a bad wave 1: exit %d\n%s", code, out)
			}
			t.Logf("advance refused: %s", out)
			for _, name := range []string{"b2", "c3", "d4"} {
				if v, _ := agents[name].liveVersion(t, "web"); v != "v2" {
					t.Fatalf("web on %s is %s: the bad change left wave 1", name, v)
				}
				if err := agents[name].cluster.Client().Get(context.Background(), client.ObjectKey{Namespace: "web", Name: "web"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
					t.Fatalf("%s has the bad Deployment (or the API failed): %v", name, err)
				}
			}

			if out, code := hubRun(t, "rollout", "abort", "web", "--repo", repo.Dir); code != 0 {
				t.Fatalf("abort: exit %d\n%s", code, out)
			}
			repo.Push(t, "abort web")
			agents["a1"].waitVersion(t, "web", "v2")
			waitFor(t, 2*time.Minute, "a1 Ready again on the previous content", func() (bool, string) {
				p := waveProgress(t, repo, "web")
				c := p.Waves[0].Clusters[0]
				return c.Phase == rollout.PhaseReady && p.Aborted, fmt.Sprintf("%+v", p)
			})
			if err := agents["a1"].cluster.Client().Get(context.Background(), client.ObjectKey{Namespace: "web", Name: "web"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
				t.Fatalf("abort left the bad Deployment on a1: %v", err)
			}
			// The fix: the bad file goes; a new revision, a new rollout.
			repo.Remove(t, bad.file)
			repo.Write(t, "apps/web/manifests/cm.yaml", waveConfigMap("web", "v2"))
			hubRender(t, repo.Dir)
			repo.Push(t, "revert "+bad.name)
		})
	}
}
