package statuse2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

func TestMain(m *testing.M) {
	render.ServeWorkerIfRequested()
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

var clusters = []string{"alpha", "beta", "gamma"}

// Timing: heartbeats every 2s; a cluster is Unreachable after 4 × 3s of
// silence.
const (
	heartbeat    = 2 * time.Second
	loopInterval = 2 * time.Second
	unreachable  = 12 * time.Second
)

var fleetFiles = map[string]string{
	"fleets/e2e.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: e2e
spec:
  selector:
    matchLabels:
      env: e2e
  namespaces:
    - name: status-e2e
  healthCheck:
    interval: 3s
    failureThreshold: 4
`,
	"apps/settings/manifests/settings.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  color: blue
`,
	"apps/settings/app.yaml": appYAML(`
    - name: all
      destination:
        fleet: e2e
`),
}

func appYAML(policies string) string {
	return `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: settings
spec:
  source:
    manifests:
      path: manifests
  namespace: status-e2e
  timeout: 1m
  syncPolicies:` + policies
}

// brokenForBeta sends beta a patch the API server refuses (an invalid
// label value); alpha and gamma get the plain source.
const brokenForBeta = `
    - name: most
      destination:
        clusters: [alpha, gamma]
    - name: beta
      destination:
        clusters: [beta]
      overrides:
        patches:
          - target:
              kind: ConfigMap
              name: settings
            patch: |
              - op: add
                path: /metadata/labels
                value:
                  broken: "not a valid label!"
`

// ---- the fleet repo ----

// render runs `flotilla render` on the fleet repo's working directory.
func renderFleet(t *testing.T, dir string) {
	t.Helper()
	if out, code := flotilla(t, "render", "--repo", dir); code != hubcmd.ExitOK {
		t.Fatalf("flotilla render: exit %d\n%s", code, out)
	}
}

// ---- agents ----

// agent is the agent loop, wired as the binary wires it (test/agentproc),
// with the status writer as its sink.
type agent struct {
	*agentproc.InProcess
	writer *statuswriter.Writer
}

func startAgent(t *testing.T, c *testenv.Cluster, srv *gitserver.Server, name string) *agent {
	t.Helper()
	auth := statusdoc.AgentAuth(srv, name)
	w, err := statuswriter.NewWriter(statuswriter.WriterOptions{
		Cluster: name, URL: srv.URL("fleet"), Auth: auth, Timeout: 20 * time.Second,
		HeartbeatInterval: heartbeat, RetryBackoff: gitrepo.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{writer: w, InProcess: agentproc.NewInProcess(t, c, agentproc.InProcessOptions{
		Cluster: name, RepoURL: srv.URL("fleet"), Auth: auth, Namespace: "flotilla-system",
		Sink: w, Alongside: []func(context.Context) error{w.Run},
		Interval: loopInterval, FetchTimeout: 20 * time.Second,
		Identity: name + "-agent", LogTail: 30,
	})}
	a.Start()
	return a
}

// stop ends the agent: no cycle, no heartbeat any more.
func (a *agent) stop() { a.Stop() }

// ---- the hub ----

// flotilla runs the hub CLI in process and returns its output and exit code.
func flotilla(t *testing.T, args ...string) (string, int) {
	t.Helper()
	root := hubcmd.NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(&out, "error:", err)
		return out.String(), hubcmd.ExitError
	}
	return out.String(), hubcmd.ExitOK
}

type hub struct {
	url, creds, cache string
}

func (h hub) args(extra ...string) []string {
	return append([]string{"--repo", h.url, "--git-credentials-dir", h.creds, "--cache-dir", h.cache}, extra...)
}

func (h hub) fleet(t *testing.T) (*fleetview.View, error) {
	t.Helper()
	out, code := flotilla(t, append([]string{"status"}, h.args("-o", "json")...)...)
	if code != hubcmd.ExitOK {
		return nil, errors.New(out)
	}
	var v fleetview.View
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	return &v, nil
}

// waitFleet reads `flotilla status` until cond holds.
func (h hub) waitFleet(t *testing.T, timeout time.Duration, what string, cond func(map[string]fleetview.ClusterView, *fleetview.View) bool) *fleetview.View {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *fleetview.View
	var lastErr error
	for time.Now().Before(deadline) {
		v, err := h.fleet(t)
		if err == nil {
			last = v
			byName := map[string]fleetview.ClusterView{}
			for _, c := range v.Clusters {
				byName[c.Name] = c
			}
			if cond(byName, v) {
				return v
			}
		}
		lastErr = err
		time.Sleep(time.Second)
	}
	table := ""
	if last != nil {
		var b bytes.Buffer
		_ = fleetview.WriteFleet(&b, last, fleetview.FormatTable)
		table = b.String()
	}
	t.Fatalf("timed out after %v waiting for %s; last read error: %v\nlast view:\n%s", timeout, what, lastErr, table)
	return nil
}

func states(byName map[string]fleetview.ClusterView) string {
	var parts []string
	for _, n := range clusters {
		parts = append(parts, n+"="+string(byName[n].State))
	}
	return strings.Join(parts, " ")
}

// TestStatusThroughGit is the end-to-end scenario.
func TestStatusThroughGit(t *testing.T) {
	if testing.Short() {
		t.Skip("three clusters")
	}
	srv := gitserver.Start(t, gitserver.ForgeConfig(clusters...))
	dir := t.TempDir()
	treefile.Write(t, dir, fleetFiles)
	for _, c := range clusters {
		treefile.Write(t, dir, map[string]string{"clusters/" + c + ".yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + c + "\n  labels:\n    env: e2e\n"})
	}
	renderFleet(t, dir)
	repo := fleetrepo.New(t, srv, "fleet", dir)
	h := hub{url: srv.URL("fleet"), creds: agentproc.CredentialsDir(t, gitserver.Maintainer, srv.Password(gitserver.Maintainer)), cache: t.TempDir()}

	kube := testenv.StartClusters(t, len(clusters), testenv.ClusterOptions{Mode: testenv.Minimal})
	agents := map[string]*agent{}
	for i, name := range clusters {
		agents[name] = startAgent(t, kube[i], srv, name)
	}

	// 1. After the render, all three are in sync.
	c1 := srv.Head("fleet", "main")
	h.waitFleet(t, 3*time.Minute, "all three InSync at the first commit", func(c map[string]fleetview.ClusterView, v *fleetview.View) bool {
		t.Logf("after render: %s", states(c))
		for _, n := range clusters {
			if c[n].State != fleetview.StateInSync || status.RevisionHash(c[n].AppliedRevision) != c1 || c[n].UnitsReady != c[n].UnitsTotal || c[n].UnitsTotal < 2 {
				return false
			}
		}
		return v.Summary[fleetview.StateInSync] == 3
	})

	// 2. A commit beta cannot apply: beta Failing with the reason, the
	// others in sync at the new commit.
	repo.Write(t, "apps/settings/app.yaml", appYAML(brokenForBeta))
	repo.Write(t, "apps/settings/manifests/settings.yaml", strings.Replace(fleetFiles["apps/settings/manifests/settings.yaml"], "blue", "green", 1))
	renderFleet(t, repo.Dir)
	c2 := status.RevisionHash(repo.Push(t, "Green settings; a broken patch for beta"))
	v := h.waitFleet(t, 3*time.Minute, "beta Failing, alpha and gamma InSync at the second commit", func(c map[string]fleetview.ClusterView, _ *fleetview.View) bool {
		t.Logf("after the broken commit: %s", states(c))
		return c["beta"].State == fleetview.StateFailing &&
			c["alpha"].State == fleetview.StateInSync && status.RevisionHash(c["alpha"].AppliedRevision) == c2 &&
			c["gamma"].State == fleetview.StateInSync && status.RevisionHash(c["gamma"].AppliedRevision) == c2
	})
	var beta fleetview.ClusterView
	for _, c := range v.Clusters {
		if c.Name == "beta" {
			beta = c
		}
	}
	if len(beta.FailingUnits) != 1 || beta.FailingUnits[0].Unit != "settings" || beta.FailingUnits[0].Reason != status.ReasonApplyFailed ||
		!strings.Contains(beta.FailingUnits[0].Message, "Invalid value") {
		t.Errorf("beta's failure: %+v", beta.FailingUnits)
	}
	table, _ := flotilla(t, append([]string{"status"}, h.args()...)...)
	t.Logf("flotilla status:\n%s", table)
	if !strings.Contains(table, "beta/settings: ApplyFailed") {
		t.Errorf("the table does not show beta's failing unit:\n%s", table)
	}
	out, code := flotilla(t, append([]string{"status", "rollout", c2}, h.args("-o", "json")...)...)
	var r fleetview.RolloutView
	if code != hubcmd.ExitOK || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("status rollout: exit %d\n%s", code, out)
	}
	for _, c := range r.Clusters {
		want := fleetview.RolloutCompleted
		if c.Name == "beta" {
			want = fleetview.RolloutFailed
		}
		if c.State != want {
			t.Errorf("rollout of %s on %s: %s (%s), want %s", c2[:12], c.Name, c.State, c.Reason, want)
		}
	}

	// 3. The server refuses an agent's push to main.
	ctx := context.Background()
	sneak := func(cluster, ref string) error {
		_, err := gitrepo.PushFiles(ctx, srv.URL("fleet"), ref, map[string][]byte{"x.yaml": []byte("x: 1\n")}, "sneaky",
			gitrepo.Signature{Name: cluster}, gitrepo.PushOptions{Auth: statusdoc.AgentAuth(srv, cluster)})
		return err
	}
	if err := sneak("alpha", "refs/heads/main"); !errors.Is(err, gitrepo.ErrRejected) {
		t.Errorf("alpha's agent pushing main: %v, want ErrRejected", err)
	}
	if head := srv.Head("fleet", "main"); head != c2 {
		t.Fatalf("main moved to %s", head)
	}
	refusedAt := time.Now()

	// 4. gamma's agent stops: Unreachable after the fleet's threshold. The
	// bound is anchored on a heartbeat gamma is known to have sent (gamma's
	// last one is no older), not on the stop: on a busy machine the last
	// heartbeat may lag the stop by more than an interval.
	sent := h.waitFleet(t, time.Minute, "gamma's heartbeat", func(c map[string]fleetview.ClusterView, _ *fleetview.View) bool {
		return c["gamma"].Heartbeat != nil
	})
	var seen time.Time
	for _, c := range sent.Clusters {
		if c.Name == "gamma" {
			seen = c.Heartbeat.Time
		}
	}
	stopped := time.Now()
	agents["gamma"].stop()
	h.waitFleet(t, unreachable+3*time.Minute, "gamma Unreachable", func(c map[string]fleetview.ClusterView, _ *fleetview.View) bool {
		return c["gamma"].State == fleetview.StateUnreachable && c["alpha"].State == fleetview.StateInSync
	})
	t.Logf("gamma turned Unreachable %v after its agent stopped", time.Since(stopped).Round(time.Millisecond))
	if age := time.Since(seen); age < unreachable {
		t.Errorf("gamma turned Unreachable %v after a heartbeat it sent, before the %v threshold", age, unreachable)
	}

	// Nor may alpha's agent write gamma's status (quiet now, so no race
	// with gamma's own heartbeats blurs the answer).
	if err := sneak("alpha", status.RefFor("gamma")); !errors.Is(err, gitrepo.ErrRejected) {
		t.Errorf("alpha's agent pushing gamma's status ref: %v, want ErrRejected", err)
	}

	// 5. A forged status: someone with gamma's agent credentials commits a
	// document claiming to be beta. gamma is flagged, beta is not touched.
	claim := &status.ClusterStatus{Cluster: "beta", DesiredRevision: "main@sha1:" + c2, AppliedRevision: "main@sha1:" + c2, Heartbeat: v.Time}
	data, err := status.Encode(claim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gitrepo.PushFiles(ctx, srv.URL("fleet"), status.RefFor("gamma"), map[string][]byte{status.FileName: data}, "all good",
		gitrepo.Signature{Name: "gamma"}, gitrepo.PushOptions{Auth: statusdoc.AgentAuth(srv, "gamma")}); err != nil {
		t.Fatal(err)
	}
	h.waitFleet(t, 3*time.Minute, "gamma Untrusted, beta still Failing", func(c map[string]fleetview.ClusterView, _ *fleetview.View) bool {
		return c["gamma"].State == fleetview.StateUntrusted && strings.Contains(c["gamma"].Reason, `claims to be cluster "beta"`) &&
			c["beta"].State == fleetview.StateFailing
	})

	// 6. The fix: beta applies it; alpha, whose credentials were refused on
	// main, still works: it fetched the fix (its slice is unchanged, so
	// it stays InSync) and kept committing status since the refusal.
	repo.Write(t, "apps/settings/app.yaml", appYAML(strings.Split(brokenForBeta, "      overrides:")[0]))
	renderFleet(t, repo.Dir)
	c3 := status.RevisionHash(repo.Push(t, "Fix beta"))
	h.waitFleet(t, 3*time.Minute, "alpha and beta InSync at the fix", func(c map[string]fleetview.ClusterView, _ *fleetview.View) bool {
		t.Logf("after the fix: %s", states(c))
		alpha := c["alpha"]
		return alpha.State == fleetview.StateInSync && status.RevisionHash(alpha.DesiredRevision) == c3 &&
			alpha.Heartbeat != nil && alpha.Heartbeat.After(refusedAt) &&
			c["beta"].State == fleetview.StateInSync && status.RevisionHash(c["beta"].AppliedRevision) == c3
	})
	if err := agents["alpha"].writer.LastError(); err != nil {
		t.Errorf("alpha's status writer: %v", err)
	}
	table, _ = flotilla(t, append([]string{"status"}, h.args()...)...)
	t.Logf("flotilla status at the end:\n%s", table)

	// Every agent pushed only its own ref.
	refs, err := srv.Refs("fleet")
	if err != nil {
		t.Fatal(err)
	}
	for ref := range refs {
		if ref != "refs/heads/main" && !strings.HasPrefix(ref, status.RefPrefix) {
			t.Errorf("unexpected ref %s", ref)
		}
	}
	if len(refs) != 1+len(clusters) {
		t.Errorf("refs: %v", refs)
	}
}
