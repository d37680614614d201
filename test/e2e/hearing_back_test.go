package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/cijob"
	"github.com/flotilla-gitops/flotilla/test/gitea"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
	"github.com/flotilla-gitops/flotilla/test/webhookrecv"
)

var hearClusters = []string{"a1", "b2", "c3"}

// hearFiles: web rolls out to a1, then b2, then c3 (no bake), and every
// event goes to a generic-hmac webhook.
func hearFiles(hook string) map[string]string {
	files := map[string]string{
		"fleets/prod.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: prod
spec:
  clusters: [a1, b2, c3]
  namespaces: [{name: web}]
  rollout:
    bake: 0s
    waves:
      - {name: canary, clusters: [a1]}
      - {name: early, clusters: [b2]}
`,
		"apps/web/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: web
spec:
  source: {manifests: {path: manifests}}
  namespace: web
  timeout: 20s
  syncPolicies: [{destination: {fleet: prod}}]
`,
		"apps/web/manifests/cm.yaml": waveConfigMap("web", "v1"),
		"notifications/providers/ops.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Provider
metadata:
  name: ops
spec:
  type: generic-hmac
  address: ` + hook + `
  secretRef: {name: ops}
`,
		"notifications/alerts/prod.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Alert
metadata:
  name: prod
spec:
  providerRef: {name: ops}
  eventSources: [{kind: Fleet, name: prod}]
`,
	}
	for _, c := range hearClusters {
		files["clusters/"+c+".yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + c + "\n"
	}
	return files
}

// giteaStatus is one commit status as Gitea lists it.
type giteaStatus struct {
	Context     string `json:"context"`
	Status      string `json:"status"`
	Description string `json:"description"`
}

// TestHearingBackOnGitea: a fleet repo on a real Gitea, agents on three
// live clusters following it, and the template's rollout job run as
// written, as Gitea Actions would run it (FLOTILLA_FORGE=gitea), after
// each merge of a pull request. For a good change the merged commit's
// status flotilla/web goes pending → success as the waves are released
// and Ready, and the webhook gets each wave's release and the rollout's
// completion; for a change that fails on the canary, the merged commit's
// status turns failure naming a1 and saying where the rollout is held,
// and the webhook gets Failing and WaveHeld. Every event arrives once,
// signed (the receiver checks the HMAC), across the job's rounds, its
// runs and a scheduled run after them.
func TestHearingBackOnGitea(t *testing.T) {
	const hmacKey = "ops-hmac-key-of-the-e2e"
	hook := webhookrecv.Start(t, hmacKey)
	forge := gitea.Start(t)
	cs := testenv.StartClusters(t, len(hearClusters), testenv.ClusterOptions{Mode: testenv.Minimal})
	ctx := context.Background()

	forge.CreateRepo(t, "fleet")
	repo := forge.Repo("fleet")
	dir := t.TempDir()
	treefile.Write(t, dir, hearFiles(hook.URL+"/flotilla"))
	hubRender(t, dir)
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git(dir, "init", "-q", "-b", "main")
	git(dir, "add", "-A")
	git(dir, "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-qm", "fleet")
	git(dir, "push", "-q", forge.GitURL("fleet"), "main")

	u, err := url.Parse(forge.GitURL("fleet"))
	if err != nil {
		t.Fatal(err)
	}
	password, _ := u.User.Password()
	auth := gitrepo.Auth{Username: u.User.Username(), Password: password}
	u.User = nil
	agents := make([]*waveAgent, len(hearClusters))
	for i, name := range hearClusters {
		agents[i] = startAgentOn(t, u.String(), auth, name, cs[i])
	}
	for _, a := range agents {
		a.waitVersion(t, "web", "v1")
	}

	// The template's rollout job, as written, in a fresh clone of main.
	wf, script := templateStep(t, "flotilla-rollout.yml", "advance", "Advance")
	bin, runner := runnerEnv(t, wf)
	// gh, which the job calls to start the slice publisher (not used here).
	if err := os.WriteFile(filepath.Join(bin, "gh"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	job := func(event string) string {
		t.Helper()
		stepEnv, err := cijob.GitHubStepEnv(wf, "advance", "Advance", map[string]string{
			"github.token": forge.Token, "github.repository": repo, "github.event_name": event,
		})
		if err != nil {
			t.Fatal(err)
		}
		env := append(append(slices.Clone(runner), stepEnv...), "FLOTILLA_FORGE=gitea", "GITHUB_SERVER_URL="+forge.URL,
			"GITHUB_REPOSITORY="+repo, "GITHUB_RUN_ID=1", "FLOTILLA_ROLLOUT_FOLLOW=180", "FLOTILLA_ROLLOUT_POLL=1",
			"FLOTILLA_NOTIFY_OPS_TOKEN="+hmacKey)
		clone := filepath.Join(t.TempDir(), "clone")
		if out, err := cijob.Run(ctx, "", "git clone -q --branch main "+forge.GitURL("fleet")+" "+clone, env); err != nil {
			t.Fatalf("clone: %v\n%s", err, out)
		}
		out, err := cijob.Run(ctx, clone, script, env)
		if err != nil {
			t.Fatalf("the template's rollout job (%s): %v\n%s", event, err, out)
		}
		if strings.Contains(out, hmacKey) || strings.Contains(out, forge.Token) {
			t.Fatalf("the job's log shows a secret:\n%s", out)
		}
		return out
	}
	// The schedule's first run records where the fleet stands: a
	// provider's first run tells only what is wrong.
	job("schedule")
	if got := hook.Received(); len(got) != 0 {
		t.Fatalf("the first run told %v about a healthy fleet", got)
	}

	// merge pushes a change on a branch, opens a pull request and merges
	// it through Gitea's API; it returns the merged commit.
	merge := func(branch, version string, extra map[string]string) string {
		t.Helper()
		git(dir, "checkout", "-q", "-B", branch, "main")
		git(dir, "pull", "-q", "--ff-only", forge.GitURL("fleet"), "main")
		files := map[string]string{"apps/web/manifests/cm.yaml": waveConfigMap("web", version)}
		for k, v := range extra {
			files[k] = v
		}
		treefile.Write(t, dir, files)
		hubRender(t, dir)
		git(dir, "add", "-A")
		git(dir, "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-qm", "web "+version)
		git(dir, "push", "-q", forge.GitURL("fleet"), branch)
		pr := forge.CreatePull(t, "fleet", branch, "main")
		forge.WaitMergeable(t, "fleet", pr)
		if err := forge.API(ctx, http.MethodPost, fmt.Sprintf("/api/v1/repos/%s/pulls/%d/merge", repo, pr), map[string]string{"Do": "merge"}, nil); err != nil {
			t.Fatalf("merge #%d: %v", pr, err)
		}
		var p struct {
			MergeCommit string `json:"merge_commit_sha"`
		}
		if err := forge.API(ctx, http.MethodGet, fmt.Sprintf("/api/v1/repos/%s/pulls/%d", repo, pr), nil, &p); err != nil || p.MergeCommit == "" {
			t.Fatalf("merged commit of #%d: %v %+v", pr, err, p)
		}
		git(dir, "checkout", "-q", "main")
		git(dir, "pull", "-q", "--ff-only", forge.GitURL("fleet"), "main")
		return p.MergeCommit
	}
	statuses := func(commit string) []giteaStatus {
		t.Helper()
		var out []giteaStatus
		if err := forge.API(ctx, http.MethodGet, "/api/v1/repos/"+repo+"/statuses/"+commit+"?sort=oldest&limit=50", nil, &out); err != nil {
			t.Fatal(err)
		}
		var web []giteaStatus
		for _, s := range out {
			if s.Context == "flotilla/web" {
				web = append(web, s)
			}
		}
		return web
	}

	// A good change: the job follows the rollout to its end.
	good := merge("v2", "v2", nil)
	out := job("push")
	for _, a := range agents {
		a.waitVersion(t, "web", "v2")
	}
	web := statuses(good)
	t.Logf("flotilla/web on the merged %s: %+v", good[:12], web)
	if len(web) < 2 || web[0].Status != "pending" || web[len(web)-1].Status != "success" {
		t.Errorf("flotilla/web on the merged %s: %+v, want pending, …, success\njob:\n%s", good[:12], web, out)
	}
	received := hook.Received()
	if n := countOf(received, "WaveReleased Application/web"); n != 3 || countOf(received, "RolloutComplete Application/web") != 1 {
		t.Errorf("the webhook got %v, want each of the 3 waves released and the rollout complete, once", received)
	}

	// A change that fails on the canary: the job stops following once
	// notify says failure.
	bad := merge("v3", "v3", map[string]string{"apps/web/manifests/svc.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports: [{port: 99999}]\n"})
	out = job("push")
	web = statuses(bad)
	t.Logf("flotilla/web on the merged %s: %+v", bad[:12], web)
	last := giteaStatus{}
	if len(web) > 0 {
		last = web[len(web)-1]
	}
	if last.Status != "failure" || !strings.Contains(last.Description, "failing on a1") || !strings.Contains(last.Description, "held at wave early") {
		t.Errorf("flotilla/web on the merged %s: %+v, want failure naming a1 and the held wave\njob:\n%s", bad[:12], web, out)
	}
	want := append(received, "WaveReleased Application/web", "Failing Cluster/a1", "WaveHeld Application/web")
	waitFor(t, 30*time.Second, "the failure's events", func() (bool, string) {
		got := hook.Received()
		return len(got) >= len(want), fmt.Sprint(got)
	})
	// A scheduled run after both: nothing new to tell.
	job("schedule")
	got := hook.Received()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the webhook got %v, want %v: each event once", got, want)
	}
	if n := hook.Refused(); n > 0 {
		t.Errorf("%d events were not signed with the provider's key", n)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
