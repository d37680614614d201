package e2e_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
)

// TestFailedObjectDoesNotHoldItsFix: a unit with `timeout: 1h` whose
// Deployment fails (past its progress deadline) reports the failure, and
// the fix pushed after it is applied and Ready: the agent does not wait out
// the hour for an object that will never be Ready (the bound below is
// minutes; passing proves the wait ended, no duration is asserted).
func TestFailedObjectDoesNotHoldItsFix(t *testing.T) {
	c := agentCluster(t)
	const (
		cluster = "failed-object"
		ns      = "failed-object"
	)
	if err := c.CreateNamespace(testCtx(t), ns); err != nil {
		t.Fatal(err)
	}
	unit := func(objects string) []handUnit {
		return []handUnit{{name: "web", wait: true, timeout: time.Hour, files: map[string]string{
			"kustomization.yaml": "namespace: " + ns + "\nresources: [objects.yaml]\n",
			"objects.yaml":       objects,
		}}}
	}
	dir := t.TempDir()
	// Never schedulable, so past its (short) progress deadline at once:
	// kstatus Failed, while its spec, which the agent applied, never moves.
	writeHandSlice(t, dir, cluster, unit(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  progressDeadlineSeconds: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector: {no-such-label: x}
      containers: [{name: web, image: registry.example/web:1}]
`))
	repo := fleetrepo.New(t, agentGit(t), cluster, dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	a.start()

	st := a.waitStatus(3*time.Minute, "the unit failed, naming its Deployment", func(st *status.ClusterStatus) bool {
		cond := condOf(unitOf(st, "web").Conditions, status.ConditionReady)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == status.ReasonHealthCheckFailed &&
			strings.Contains(cond.Message, "Deployment/"+ns+"/web: Failed")
	})
	t.Logf("failed:\n%s", describeStatus(st))

	// The fix: a ConfigMap instead (the Deployment is pruned).
	writeHandSlice(t, dir, cluster, unit("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  fixed: \"true\"\n"))
	fix := repo.Push(t, "web: a ConfigMap")
	st = a.waitApplied(3*time.Minute, fix)
	t.Logf("fixed:\n%s", describeStatus(st))
}
