package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/agent/volcano"
	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "write the screenshots under docs/images/")

func TestMain(m *testing.M) {
	render.ServeWorkerIfRequested()
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// Timing: heartbeats every 2s; a cluster is Unreachable after 3s × 4 of
// silence (the fleet's healthCheck).
const (
	heartbeat    = 2 * time.Second
	loopInterval = 2 * time.Second
)

// The fleet: alpha runs Volcano on kwok nodes and gets the job train;
// beta gets a patch the API server refuses until the fix; gamma's agent is
// stopped.
const (
	alpha, beta, gamma = "alpha", "beta", "gamma"
	appNS, jobNS       = "dash-e2e", "ml"
)

var clusterNames = []string{alpha, beta, gamma}

func clusterFile(name, tier string) string {
	return fmt.Sprintf("apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: %s\n  labels:\n    env: e2e\n    tier: %s\n", name, tier)
}

func appFile(betaBroken bool) string {
	patch := ""
	if betaBroken {
		patch = `
      overrides:
        patches:
          - target:
              kind: ConfigMap
              name: settings
            patch: |
              - op: add
                path: /metadata/labels
                value:
                  broken: "not a valid label!"`
	}
	return `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: settings
spec:
  source:
    manifests:
      path: manifests
  namespace: ` + appNS + `
  timeout: 1m
  syncPolicies:
    - name: most
      destination:
        clusters: [alpha, gamma]
    - name: beta
      destination:
        clusters: [beta]` + patch + "\n"
}

var fleetFiles = map[string]string{
	"clusters/alpha.yaml": clusterFile(alpha, "gpu"),
	"clusters/beta.yaml":  clusterFile(beta, "edge"),
	"clusters/gamma.yaml": clusterFile(gamma, "edge"),
	"fleets/e2e.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: e2e
spec:
  selector:
    matchLabels: {env: e2e}
  namespaces:
    - name: ` + appNS + `
  healthCheck:
    interval: 3s
    failureThreshold: 4
`,
	"fleets/batch.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: batch
spec:
  clusters: [alpha]
  namespaces:
    - name: ` + jobNS + `
  queues:
    - name: training
      weight: 1
`,
	"apps/settings/app.yaml":                appFile(true),
	"apps/settings/manifests/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n",
	"jobs/train.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: GlobalJob
metadata:
  name: train
spec:
  namespace: ` + jobNS + `
  placement:
    type: Divided
    destination: {clusters: [alpha]}
    staticWeightList:
      - targetCluster: {clusterNames: [alpha]}
        weight: 1
  template:
    queue: training
    minAvailable: 2
    tasks:
      - name: worker
        replicas: 2
        template:
          spec:
            restartPolicy: OnFailure
            containers:
              - name: worker
                image: registry.k8s.io/pause:3.10
                resources:
                  requests: {cpu: 500m, memory: 256Mi, nvidia.com/gpu: "1"}
                  limits: {nvidia.com/gpu: "1"}
`,
}

// flotilla runs the hub CLI in process.
func flotilla(t *testing.T, args ...string) string {
	t.Helper()
	root := hubcmd.NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("flotilla %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// serveDashboard runs `flotilla dashboard` in process until the test ends
// and returns its URL.
func serveDashboard(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	root := hubcmd.NewRootCommand()
	root.SetOut(pw)
	root.SetErr(pw)
	root.SetArgs(append([]string{"dashboard", "--listen", "127.0.0.1:0"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("flotilla dashboard: %v", err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "dashboard: http://") {
		t.Fatalf("flotilla dashboard's first line: %q, %v", line, err)
	}
	logs := &agentproc.Buffer{}
	go func() { _, _ = io.Copy(logs, pr) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("flotilla dashboard's output:\n%s", logs.String())
		}
	})
	return strings.Fields(line)[1]
}

// startAgent runs cluster name's agent loop in process with the status
// writer as its sink, as the binary wires it; with Volcano when vc.
func startAgent(t *testing.T, c *testenv.Cluster, srv *gitserver.Server, name string, vc bool) *agentproc.InProcess {
	t.Helper()
	auth := statusdoc.AgentAuth(srv, name)
	w, err := statuswriter.NewWriter(statuswriter.WriterOptions{
		Cluster: name, URL: srv.URL("fleet"), Auth: auth, Timeout: 20 * time.Second,
		HeartbeatInterval: heartbeat, RetryBackoff: gitrepo.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := agentproc.InProcessOptions{
		Cluster: name, RepoURL: srv.URL("fleet"), Auth: auth, Namespace: "flotilla-system",
		Sink: w, Alongside: []func(context.Context) error{w.Run},
		Interval: loopInterval, FetchTimeout: 20 * time.Second, Identity: name + "-agent", LogTail: 40,
	}
	if vc {
		cfg := c.RESTConfig()
		o.Volcano = func(a *apply.Applier) (reconcile.Volcano, error) {
			return volcano.NewManager(cfg, volcano.Options{Applier: a, DeleteWait: 30 * time.Second})
		}
	}
	a := agentproc.NewInProcess(t, c, o)
	a.Start()
	return a
}

// TestDashboardInBrowser is the browser test: a real fleet, the
// page in headless Chromium, states in the right rows, the failing unit's
// error, the completed Volcano job, the page following a fix without
// reloading, and status -o html showing the same.
func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("three clusters and a browser")
	}
	ctx := browser(t)
	srv := gitserver.Start(t, gitserver.ForgeConfig(clusterNames...))
	dir := t.TempDir()
	treefile.Write(t, dir, fleetFiles)
	flotilla(t, "render", "--repo", dir)
	srv.MustCreateRepo(t, "fleet", dir)

	vc := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Full, Volcano: true,
		Nodes: testenv.GPUNodes("gpu", 2, 2)})
	minimal := testenv.StartClusters(t, 2, testenv.ClusterOptions{Mode: testenv.Minimal})
	startAgent(t, vc, srv, alpha, true)
	startAgent(t, minimal[0], srv, beta, false)
	gammaAgent := startAgent(t, minimal[1], srv, gamma, false)

	hub := []string{"--repo", srv.URL("fleet"), "--git-credentials-dir", agentproc.CredentialsDir(t, gitserver.Maintainer, srv.Password(gitserver.Maintainer)),
		"--cache-dir", t.TempDir(), "--commit-url", "https://git.example.com/fleet/commit/{sha}"}
	url := serveDashboard(t, append(hub, "--refresh", "1s")...)
	do(t, ctx, time.Minute, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("clusters")))
	// Set on this page only: a reload would lose it.
	eval[string](t, ctx, `window.sameDocument = "yes"`)

	// 1. alpha in sync with its job completed, beta failing, gamma in sync.
	waitRows(t, ctx, 5*time.Minute, "alpha InSync, beta Failing, gamma InSync, train Completed", func(r map[string]row) bool {
		return r[alpha].State == "InSync" && r[beta].State == "Failing" && r[gamma].State == "InSync" &&
			strings.Contains(text(t, ctx, `#jobs tr[data-cluster="alpha"]`), "Completed")
	})
	job := text(t, ctx, `#jobs tr[data-cluster="alpha"]`)
	for _, want := range []string{"ml/train", "Completed", "Fits", "2 succeeded"} {
		if !strings.Contains(job, want) {
			t.Errorf("the job row lacks %q: %s", want, job)
		}
	}
	unit := text(t, ctx, `tbody[data-cluster="beta"] tr[data-unit="settings"]`)
	for _, want := range []string{"Failing", "ApplyFailed", "Invalid value", "not a valid label!"} {
		if !strings.Contains(unit, want) {
			t.Errorf("beta's failing unit lacks %q: %s", want, unit)
		}
	}
	if r := rows(t, ctx); !strings.Contains(r[beta].Text, "settings: ApplyFailed") {
		t.Errorf("beta's row does not say why: %s", r[beta].Text)
	}

	// 2. gamma's agent stops: Unreachable once the heartbeat is older than
	// the fleet's 12s.
	gammaAgent.Stop()
	waitRows(t, ctx, 3*time.Minute, "gamma Unreachable", func(r map[string]row) bool {
		return r[gamma].State == "Unreachable" && r[alpha].State == "InSync" && r[beta].State == "Failing"
	})
	if r := rows(t, ctx); !strings.Contains(r[gamma].Text, "no heartbeat for") {
		t.Errorf("gamma's row does not say why: %s", r[gamma].Text)
	}
	screenshot(t, ctx, "dashboard")

	// 3. The filters: by state, then by label; the count says what is shown.
	setFilter(t, ctx, "f-state", "Unreachable")
	r := rows(t, ctx)
	if !r[alpha].Hidden || !r[beta].Hidden || r[gamma].Hidden {
		t.Errorf("state filter Unreachable: %s", describe(r))
	}
	if got := text(t, ctx, "#f-count"); got != "1 of 3 clusters shown" {
		t.Errorf("filter count %q", got)
	}
	screenshot(t, ctx, "dashboard-filtered")
	setFilter(t, ctx, "f-state", "")
	do(t, ctx, 30*time.Second, chromedp.SendKeys(chromedp.ID("f-label"), "tier=edge"))
	r = rows(t, ctx)
	if !r[alpha].Hidden || r[beta].Hidden || r[gamma].Hidden {
		t.Errorf("label filter tier=edge: %s", describe(r))
	}
	setFilter(t, ctx, "f-label", "")

	// 4. The fix lands: the page, never reloaded, shows beta in sync at it,
	// linked to its commit.
	treefile.Write(t, dir, map[string]string{"apps/settings/app.yaml": appFile(false)})
	flotilla(t, "render", "--repo", dir)
	fixed := srv.Commit(t, "fleet", gitserver.Maintainer, treefile.Read(t, dir, "apps/settings/app.yaml", "rendered"), nil, "Fix beta's settings")
	waitRows(t, ctx, 3*time.Minute, "beta InSync at the fix", func(r map[string]row) bool {
		return r[beta].State == "InSync" && strings.Contains(r[beta].Text, fixed[:12])
	})
	if same := eval[string](t, ctx, `window.sameDocument || "reloaded"`); same != "yes" {
		t.Errorf("the page was reloaded (%q): it must update in place", same)
	}
	if got := text(t, ctx, "#rollout"); !strings.Contains(got, "beta") || !strings.Contains(got, "Completed") {
		t.Errorf("the rollout of the fix: %s", got)
	}
	if href := eval[string](t, ctx, `document.querySelector('tbody[data-cluster="beta"] td a').href`); href != "https://git.example.com/fleet/commit/"+fixed {
		t.Errorf("beta's revision links to %q", href)
	}
	if r := rows(t, ctx); r[gamma].State != "Unreachable" || r[alpha].State != "InSync" {
		t.Errorf("after the fix: %s", describe(r))
	}

	// 5. status -o html: the same view as one file, opened from disk.
	page := flotilla(t, append([]string{"status", "-o", "html"}, hub...)...)
	file := filepath.Join(t.TempDir(), "fleet.html")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, time.Minute, chromedp.Navigate("file://"+file), chromedp.WaitVisible(chromedp.ID("clusters")))
	r = rows(t, ctx)
	if r[alpha].State != "InSync" || r[beta].State != "InSync" || r[gamma].State != "Unreachable" {
		t.Errorf("status -o html: %s", describe(r))
	}
	if got := text(t, ctx, "#refresh"); !strings.Contains(got, "does not refresh") {
		t.Errorf("status -o html says %q about refreshing", got)
	}
	if got := text(t, ctx, `#jobs tr[data-cluster="alpha"]`); !strings.Contains(got, "Completed") {
		t.Errorf("status -o html's job row: %s", got)
	}
	screenshot(t, ctx, "status-html")
}

// setFilter sets a filter control as a reader would, firing its event.
func setFilter(t *testing.T, ctx context.Context, id, value string) {
	t.Helper()
	eval[bool](t, ctx, fmt.Sprintf(`(() => { const e = document.getElementById(%q); e.value = %q;
  return e.dispatchEvent(new Event(e.tagName === "SELECT" ? "change" : "input", {bubbles: true})); })()`, id, value))
}
