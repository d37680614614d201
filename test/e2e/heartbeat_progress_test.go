package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
)

// neverReadyUnit is a Deployment whose pod fits no node: its health wait
// lasts the unit's whole timeout (2 minutes in a hand-written slice).
func neverReadyUnit(ns string) handUnit {
	return handUnit{name: "slow", wait: true, files: map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - deploy.yaml\n",
		"deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: slow
  namespace: ` + ns + `
spec:
  selector:
    matchLabels: {app: slow}
  template:
    metadata:
      labels: {app: slow}
    spec:
      nodeSelector: {flotilla.dev/test: no-such-node}
      containers:
        - name: main
          image: nginx:1.27
`,
	}}
}

// TestLongHealthWaitKeepsTheClusterReachable: an agent restarted into a
// cycle whose unit waits for health much longer than the fleet's
// Unreachable threshold keeps heartbeating with the cycle's progress, so
// `flotilla status` shows the cluster reachable and what it is waiting
// for, never Unreachable (issue 22: heartbeats used to wait for the end of
// the cycle).
func TestLongHealthWaitKeepsTheClusterReachable(t *testing.T) {
	c := agentCluster(t)
	srv := newGitServer(t)
	const cluster, ns = "hb", "hb-app"
	dir := t.TempDir()
	fast := settingsUnit(ns, "blue")
	writeHandSlice(t, dir, cluster, []handUnit{fast})
	for rel, content := range map[string]string{
		"clusters/" + cluster + ".yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + cluster + "\nspec:\n  kubernetesVersion: v1.36.3\n",
		// Unreachable after 10s without a heartbeat.
		"fleets/edge.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: edge\nspec:\n  clusters: [" + cluster + "]\n  healthCheck:\n    interval: 5s\n    failureThreshold: 2\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo := fleetrepo.New(t, srv, "fleet", dir)
	auth, err := gitrepo.LoadAuth(agentUser(t, srv, cluster))
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	// startAgent wires an agent as the binary does: status to a file in
	// the cache and to the status ref, a heartbeat every second.
	startAgent := func() *agentproc.InProcess {
		w, err := statuswriter.NewWriter(statuswriter.WriterOptions{
			Cluster: cluster, URL: repo.URL, Auth: auth, Timeout: 20 * time.Second, HeartbeatInterval: time.Second,
			RetryBackoff: gitrepo.Backoff{Initial: 200 * time.Millisecond, Max: time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		a := agentproc.NewInProcess(t, c, agentproc.InProcessOptions{
			Cluster: cluster, RepoURL: repo.URL, Auth: auth, CacheDir: cache, Namespace: "flotilla-" + cluster,
			Sink:      reconcile.Sinks{reconcile.FileSink{Path: agentproc.StatusFile(cache)}, w},
			Alongside: []func(context.Context) error{w.Run},
			Interval:  2 * time.Second, Heartbeat: time.Second,
		})
		a.Start()
		return a
	}
	view := func() (*fleetview.ClusterView, string) {
		v, err := fleetview.Read(testCtx(t), fleetview.ReadOptions{Repo: srv.RepoPath("fleet"), Branch: "main", Clusters: []string{cluster}})
		if err != nil {
			return nil, err.Error()
		}
		if len(v.Clusters) != 1 {
			return nil, fmt.Sprintf("%d clusters", len(v.Clusters))
		}
		var out bytes.Buffer
		if err := fleetview.WriteFleet(&out, v, "table"); err != nil {
			return nil, err.Error()
		}
		return &v.Clusters[0], out.String()
	}
	waitsForSlow := func(cv *fleetview.ClusterView) bool {
		return cv != nil && cv.Progress != nil && slices.ContainsFunc(cv.Progress.Units, func(u status.UnitProgress) bool { return u.Name == "slow" })
	}

	a := startAgent()
	waitFor(t, 2*time.Minute, "the first agent's status InSync", func() (bool, string) {
		cv, out := view()
		return cv != nil && cv.State == fleetview.StateInSync, out
	})
	a.Stop()

	writeHandSlice(t, dir, cluster, []handUnit{fast, neverReadyUnit(ns)})
	repo.Push(t, "a unit that waits for health for minutes")
	a = startAgent()
	var threshold time.Duration
	waitFor(t, 2*time.Minute, "the restarted agent's progress on the status ref: waiting for the slow unit", func() (bool, string) {
		cv, out := view()
		if cv != nil {
			threshold = cv.UnreachableAfter.Duration
		}
		return waitsForSlow(cv) && strings.Contains(out, cluster+": units: slow since "), out
	})
	if threshold != 10*time.Second {
		t.Fatalf("Unreachable threshold %s, want the fleet's 10s", threshold)
	}

	// Over more than twice the threshold of the same health wait, the
	// cluster is never Unreachable.
	end := time.Now().Add(2*threshold + 5*time.Second)
	polls := 0
	for time.Now().Before(end) {
		cv, out := view()
		if cv == nil {
			t.Fatalf("status: %s", out)
		}
		if cv.State == fleetview.StateUnreachable {
			t.Fatalf("the cluster is Unreachable while its agent waits for a unit:\n%s", out)
		}
		polls++
		time.Sleep(500 * time.Millisecond)
	}
	cv, out := view()
	if !waitsForSlow(cv) {
		t.Fatalf("the health wait ended before the observation did; the test proves nothing:\n%s", out)
	}
	t.Logf("%d polls over %s, never Unreachable:\n%s", polls, 2*threshold+5*time.Second, out)

	// The wait says what it waits for: in the agent's log, and as the
	// unit's Reconciling condition in the heartbeat, which status shows.
	const waitingFor = "waiting for Deployment/" + ns + "/slow: InProgress"
	waitFor(t, 2*time.Minute, "status naming what the slow unit waits for", func() (bool, string) {
		cv, out := view()
		return cv != nil && slices.ContainsFunc(cv.WaitingUnits, func(w fleetview.UnitWaiting) bool {
			return w.Unit == "slow" && strings.HasPrefix(w.Message, waitingFor)
		}) && strings.Contains(out, "Waiting units") && strings.Contains(out, cluster+"/slow: "+waitingFor), out
	})
	if logs := a.Logs.String(); !strings.Contains(logs, `"msg":"unit waiting","cluster":"hb","unit":"slow"`) || !strings.Contains(logs, "Deployment/"+ns+"/slow: InProgress") {
		t.Fatalf("the agent did not log what the unit waits for:\n%s", agentproc.Tail(logs, 20))
	}
}
