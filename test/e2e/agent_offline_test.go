package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
)

// settingsUnit is a unit with a namespace and one ConfigMap whose color
// the tests change in Git or in the cluster.
func settingsUnit(ns, color string) handUnit {
	return handUnit{name: "app", files: map[string]string{
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ns.yaml\n  - cm.yaml\n",
		"ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n",
		"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: " + ns + "\ndata:\n  color: " + color + "\n",
	}}
}

// editColor changes the ConfigMap as `kubectl edit` would (an update by
// another field manager).
func editColor(t *testing.T, k client.Client, ns, color string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["color"] = color
	if err := k.Update(testCtx(t), cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
}

func waitColor(t *testing.T, k client.Client, ns, color string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	waitFor(t, timeout, "color "+color, func() (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
			return false, err.Error()
		}
		return cm.Data["color"] == color, fmt.Sprint(cm.Data)
	})
	return time.Since(start)
}

// TestAgentGitOutage: with the Git server down the agent keeps correcting
// drift from its cached checkout, also after a restart, reports the outage
// in status, and picks up new commits once Git is back.
func TestAgentGitOutage(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	srv := newGitServer(t)
	const cluster, ns = "offline", "offline-app"
	dir := t.TempDir()
	writeHandSlice(t, dir, cluster, []handUnit{settingsUnit(ns, "blue")})
	repo := fleetrepo.New(t, srv, "fleet", dir)
	const interval = 2 * time.Second
	cache := t.TempDir()
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo, interval: interval, cacheDir: cache})
	a.start()
	rev1 := repo.Head()
	a.waitApplied(time.Minute, rev1)

	srv.Stop()
	st := a.waitStatus(time.Minute, "the outage in status", func(st *status.ClusterStatus) bool {
		return strings.Contains(st.LastError, "unreachable")
	})
	if st.FetchedRevision != rev1 || st.DesiredRevision != rev1 || !allUnitsReady(st) {
		t.Fatalf("status during the outage:\n%s", describeStatus(st))
	}
	if ready := condOf(st.Conditions, status.ConditionReady); ready == nil || ready.Reason != status.ReasonGitOperationFailed {
		t.Errorf("cluster Ready condition during the outage: %+v", ready)
	}
	if strings.Contains(st.LastError, gitUserPassword(cluster)) {
		t.Fatalf("status leaks the Git password: %s", st.LastError)
	}

	editColor(t, k, ns, "red")
	edited := time.Now()
	took := waitColor(t, k, ns, "blue", 2*time.Minute)
	t.Logf("drift corrected offline after %s", took.Round(10*time.Millisecond))
	assertCorrectedByNextCycle(t, edited, a.logs.String)

	// A restarted agent works from the checkout cached on disk.
	a.stop()
	b := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo, interval: interval, cacheDir: cache})
	b.start()
	b.waitStatus(time.Minute, "the restarted agent's first cycle", func(st *status.ClusterStatus) bool {
		return st.FetchedRevision == rev1 && allUnitsReady(st) && strings.Contains(st.LastError, "unreachable")
	})
	editColor(t, k, ns, "yellow")
	edited = time.Now()
	took = waitColor(t, k, ns, "blue", 2*time.Minute)
	t.Logf("drift corrected offline by a restarted agent after %s", took.Round(10*time.Millisecond))
	assertCorrectedByNextCycle(t, edited, b.logs.String)

	// Git returns: the next commit is applied and the error clears.
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	writeHandSlice(t, dir, cluster, []handUnit{settingsUnit(ns, "green")})
	rev2 := repo.Push(t, "green")
	st = b.waitApplied(time.Minute, rev2)
	if st.LastError != "" {
		t.Errorf("error after recovery: %s", st.LastError)
	}
	waitColor(t, k, ns, "green", time.Minute)
}

// gitUserPassword is the password agentUser gives cluster's agent.
func gitUserPassword(cluster string) string { return "agent-" + cluster + "-secret" }
