package e2e_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// TestAgentReconcileNow: with an interval of an hour (and so no Git poll
// in between), a commit pushed after the first cycle reaches the cluster
// only because the agent's ConfigMap got a new
// flotilla.dev/reconcile-requested-at; the value present at start-up and
// an unrelated change of the ConfigMap start nothing.
func TestAgentReconcileNow(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	srv := agentGit(t)
	const cluster, ns, agentNS = "reconcile-now", "reconcile-now-app", "flotilla-reconcile-now"
	dir, repo, creds := handAgentFleet(t, c, srv, cluster, ns, agentNS)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "flotilla-agent-config", Namespace: agentNS,
		Annotations: map[string]string{"flotilla.dev/reconcile-requested-at": "before-start"},
	}, Data: map[string]string{"FLOTILLA_INTERVAL": "1h"}}
	if err := k.Create(testCtx(t), cm); err != nil {
		t.Fatal(err)
	}
	p := startAgentProc(t, c, repo, cluster, agentNS, "reconcile-now", t.TempDir(), creds, "--interval", "1h")
	first := repo.Head()
	p.waitStatus(2*time.Minute, "the first revision applied", func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == first && allUnitsReady(st)
	})
	waitColor(t, k, ns, "blue", time.Minute)
	waitFor(t, time.Minute, "the request watch to start", func() (bool, string) {
		return p.countLogs("watching reconcile requests") == 1, "not yet"
	})

	writeHandSlice(t, dir, cluster, []handUnit{settingsUnit(ns, "green")})
	second := repo.Push(t, "settings: green")
	if second == first {
		t.Fatal("the push made no new revision")
	}
	// An unrelated change of the ConfigMap is no request.
	patchConfigMap(t, k, agentNS, func(cm *corev1.ConfigMap) { cm.Data["FLOTILLA_LOG_LEVEL"] = "debug" })
	patchConfigMap(t, k, agentNS, func(cm *corev1.ConfigMap) {
		cm.Annotations["flotilla.dev/reconcile-requested-at"] = time.Now().UTC().Format(time.RFC3339Nano)
	})
	// The next poll is an hour away: only the request can bring green.
	waitColor(t, k, ns, "green", 2*time.Minute)
	p.waitStatus(time.Minute, "the pushed revision applied", func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == second && allUnitsReady(st)
	})
	if n := p.countLogs("reconcile requested"); n != 1 {
		t.Errorf("%d reconcile requests logged, want 1 (the start-up value and the data change are none)", n)
	}
}

// patchConfigMap changes the agent's ConfigMap as kubectl would.
func patchConfigMap(t *testing.T, k client.Client, ns string, change func(*corev1.ConfigMap)) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "flotilla-agent-config"}, cm); err != nil {
		t.Fatal(err)
	}
	change(cm)
	if err := k.Update(testCtx(t), cm, client.FieldOwner("kubectl-annotate")); err != nil {
		t.Fatal(err)
	}
}
