package e2e_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// These tests give units `timeout: 1h` and bound themselves by minutes:
// passing proves that a wait ended early, without asserting a duration.

// unschedulable is a Deployment no node takes: kstatus InProgress until
// its progress deadline (600s by default).
const unschedulable = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector: {no-such-label: x}
      containers: [{name: web, image: registry.example/web:1}]
`

// TestNewRevisionEndsHealthWait: while a unit waits for a Deployment that
// cannot become available (timeout 1h), the fix pushed to Git is applied
// and the unit Ready at the fix's revision: the agent polls Git during the
// wait and the newer revision ends it. The other unit, which the fix does
// not change, stays Ready at its content all along.
func TestNewRevisionEndsHealthWait(t *testing.T) {
	c := agentCluster(t)
	const (
		cluster = "new-revision"
		ns      = "new-revision"
	)
	if err := c.CreateNamespace(testCtx(t), ns); err != nil {
		t.Fatal(err)
	}
	units := func(web string) []handUnit {
		return []handUnit{
			{name: "steady", wait: true, files: map[string]string{
				"kustomization.yaml": "namespace: " + ns + "\nresources: [cm.yaml]\n",
				"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: steady\ndata:\n  a: \"1\"\n",
			}},
			{name: "web", wait: true, timeout: time.Hour, files: map[string]string{
				"kustomization.yaml": "namespace: " + ns + "\nresources: [web.yaml]\n",
				"web.yaml":           web,
			}},
		}
	}
	dir := t.TempDir()
	writeHandSlice(t, dir, cluster, units(unschedulable))
	repo := fleetrepo.New(t, agentGit(t), cluster, dir)
	bad := repo.Head()
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	a.start()

	waitFor(t, 2*time.Minute, "the agent waiting for Deployment web", func() (bool, string) {
		logs := a.logText()
		return strings.Contains(logs, `"msg":"unit waiting","cluster":"`+cluster+`","unit":"web"`) &&
			strings.Contains(logs, "Deployment/"+ns+"/web: InProgress"), "no wait reported yet"
	})
	steadyCM := func() string {
		var cm corev1.ConfigMap
		if err := c.Client().Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "steady"}, &cm); err != nil {
			return ""
		}
		return cm.ResourceVersion
	}
	waitFor(t, time.Minute, "ConfigMap steady applied", func() (bool, string) { return steadyCM() != "", "not yet" })
	steadyVersion := steadyCM()

	// The fix: the Deployment without its node selector.
	writeHandSlice(t, dir, cluster, units(strings.Replace(unschedulable, "      nodeSelector: {no-such-label: x}\n", "", 1)))
	pushed := time.Now()
	fix := repo.Push(t, "web: schedulable")
	st := a.waitApplied(3*time.Minute, fix)
	t.Logf("fixed:\n%s", describeStatus(st))

	if !strings.Contains(a.logText(), "unit superseded by a newer revision while waiting for health") {
		t.Errorf("the agent did not say that %s superseded web's wait at %s:\n%s", fix, bad, a.logText())
	}
	// Ready since before the fix (readySince is kept while a unit stays
	// Ready at its content) and not applied again.
	if since := unitOf(st, "steady").ReadySince; since == nil || since.After(pushed) {
		t.Errorf("unit steady, which the fix does not change, was disturbed: Ready since %v, the fix was pushed at %v", since, pushed)
	}
	if got := steadyCM(); got != steadyVersion {
		t.Errorf("ConfigMap steady, which the fix does not change, was written again: resourceVersion %s, then %s", steadyVersion, got)
	}
}

// TestFailedJobFailsItsUnit: a Job that fails (past its
// activeDeadlineSeconds) fails its unit (timeout 1h) with the Job's own
// reason and message, as a failure, not a wait; a unit that sets
// waitForTimeout (failFast: false) waits out its timeout for the same Job
// instead, and is reported as still waiting.
func TestFailedJobFailsItsUnit(t *testing.T) {
	c := agentCluster(t)
	const (
		cluster = "failed-job"
		ns      = "failed-job"
	)
	if err := c.CreateNamespace(testCtx(t), ns); err != nil {
		t.Fatal(err)
	}
	job := func(name string) string {
		return `apiVersion: batch/v1
kind: Job
metadata:
  name: ` + name + `
spec:
  activeDeadlineSeconds: 1
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {no-such-label: x}
      containers: [{name: migrate, image: registry.example/migrate:1}]
`
	}
	dir := t.TempDir()
	writeHandSlice(t, dir, cluster, []handUnit{
		{name: "migrate", wait: true, timeout: time.Hour, files: map[string]string{
			"kustomization.yaml": "namespace: " + ns + "\nresources: [job.yaml]\n", "job.yaml": job("migrate"),
		}},
		{name: "patient", wait: true, timeout: 20 * time.Second, waitForTimeout: true, files: map[string]string{
			"kustomization.yaml": "namespace: " + ns + "\nresources: [job.yaml]\n", "job.yaml": job("patient"),
		}},
	})
	repo := fleetrepo.New(t, agentGit(t), cluster, dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	a.start()

	st := a.waitStatus(3*time.Minute, "unit migrate failed with its Job's reason", func(st *status.ClusterStatus) bool {
		u := unitOf(st, "migrate")
		cond := condOf(u.Conditions, status.ConditionReady)
		return cond != nil && cond.Reason == status.ReasonHealthCheckFailed && status.UnitFailing(*u) &&
			strings.Contains(cond.Message, "Job/"+ns+"/migrate: Failed") && strings.Contains(cond.Message, "DeadlineExceeded")
	})
	t.Logf("failed:\n%s", describeStatus(st))

	// Waited for until its timeout: a health check still in progress, not
	// a failure.
	st = a.waitStatus(3*time.Minute, "unit patient waited out its timeout for its failed Job", func(st *status.ClusterStatus) bool {
		u := unitOf(st, "patient")
		cond := condOf(u.Conditions, status.ConditionReady)
		return cond != nil && cond.Reason == status.ReasonHealthCheckFailed && !status.UnitFailing(*u) &&
			strings.Contains(cond.Message, "Job/"+ns+"/patient: Failed")
	})
	t.Logf("patient:\n%s", describeStatus(st))
}

// TestFailedObjectDoesNotHoldItsFix: a unit with `timeout: 1h` whose
// Deployment fails (past its progress deadline) reports the failure, and
// the fix pushed after it is applied and Ready.
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
	writeHandSlice(t, dir, cluster, unit(strings.Replace(unschedulable, "spec:\n  selector:", "spec:\n  progressDeadlineSeconds: 1\n  selector:", 1)))
	repo := fleetrepo.New(t, agentGit(t), cluster, dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	a.start()

	st := a.waitStatus(3*time.Minute, "the unit failed, naming its Deployment", func(st *status.ClusterStatus) bool {
		cond := condOf(unitOf(st, "web").Conditions, status.ConditionReady)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == status.ReasonHealthCheckFailed &&
			strings.Contains(cond.Message, "Deployment/"+ns+"/web: Failed") && strings.Contains(cond.Message, "ProgressDeadlineExceeded")
	})
	t.Logf("failed:\n%s", describeStatus(st))

	// The fix: a ConfigMap instead (the Deployment is pruned).
	writeHandSlice(t, dir, cluster, unit("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  fixed: \"true\"\n"))
	fix := repo.Push(t, "web: a ConfigMap")
	st = a.waitApplied(3*time.Minute, fix)
	t.Logf("fixed:\n%s", describeStatus(st))
}

// TestHealthChecksJudgeCustomKinds: kinds kstatus cannot read are judged
// by the unit's health checks (Flux's healthCheckExprs): a Widget of the
// test's own CRD and a Volcano Job (the real CRD the suite builds), each
// first Failed (the unit fails at once, timeout 1h), then healthy (the
// unit Ready), by the status the test writes.
func TestHealthChecksJudgeCustomKinds(t *testing.T) {
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	widget := schema.GroupVersionKind{Group: "health.flotilla.dev", Version: "v1", Kind: "Widget"}
	installOpenCRD(t, c, widget, "widgets", apiextensionsv1.NamespaceScoped)
	if err := c.ApplyCRDFiles(testCtx(t), filepath.Join(testenv.RequireTool(t, "volcano/crds"), "batch.volcano.sh_jobs.yaml")); err != nil {
		t.Fatal(err)
	}
	const (
		cluster = "health-checks"
		ns      = "health-checks"
	)
	if err := c.CreateNamespace(testCtx(t), ns); err != nil {
		t.Fatal(err)
	}
	objects := `apiVersion: health.flotilla.dev/v1
kind: Widget
metadata:
  name: gear
spec:
  size: 3
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: train
spec:
  schedulerName: volcano
  queue: default
  minAvailable: 1
  tasks:
    - name: worker
      replicas: 1
      template:
        spec:
          restartPolicy: Never
          containers: [{name: worker, image: registry.example/train:1}]
`
	dir := t.TempDir()
	writeHandSlice(t, dir, cluster, []handUnit{{name: "custom", wait: true, timeout: time.Hour,
		files: map[string]string{"kustomization.yaml": "namespace: " + ns + "\nresources: [objects.yaml]\n", "objects.yaml": objects},
		healthChecks: []slice.HealthCheck{
			{APIVersion: "health.flotilla.dev/v1", Kind: "Widget", Current: "status.phase == 'Ready'", Failed: "status.phase == 'Broken'"},
			{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job",
				Current:    "status.state.phase == 'Completed'",
				InProgress: "status.state.phase in ['Pending', 'Running', 'Restarting']",
				Failed:     "status.state.phase in ['Failed', 'Aborted', 'Terminated']"},
		},
	}})
	repo := fleetrepo.New(t, agentGit(t), cluster, dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	a.start()

	setStatus := func(gvk schema.GroupVersionKind, name string, st map[string]any, subresource bool) {
		t.Helper()
		waitFor(t, time.Minute, "status of "+gvk.Kind+"/"+name+" written", func() (bool, string) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			if err := c.Client().Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
				return false, err.Error()
			}
			u.Object["status"] = st
			var err error
			if subresource {
				err = c.Client().Status().Update(testCtx(t), u)
			} else {
				err = c.Client().Update(testCtx(t), u)
			}
			if err != nil {
				return false, err.Error()
			}
			return true, ""
		})
	}
	vcjob := schema.GroupVersionKind{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"}

	// No status yet: both waited for, by their checks (kstatus alone would
	// call both Current: neither has conditions). As with Flux, an
	// expression that reads a status not written yet makes the object
	// Unknown, which is waited for, not failed.
	waitFor(t, 2*time.Minute, "unit custom waiting for its objects", func() (bool, string) {
		logs := a.logText()
		return strings.Contains(logs, `"msg":"unit waiting","cluster":"`+cluster+`","unit":"custom"`) &&
			strings.Contains(logs, "Widget/"+ns+"/gear: Unknown") && strings.Contains(logs, "Job/"+ns+"/train: Unknown"), "no wait reported yet"
	})
	setStatus(widget, "gear", map[string]any{"phase": "Broken"}, false)
	st := a.waitStatus(2*time.Minute, "unit custom failed by the Widget's check", func(st *status.ClusterStatus) bool {
		cond := condOf(unitOf(st, "custom").Conditions, status.ConditionReady)
		return cond != nil && cond.Reason == status.ReasonHealthCheckFailed && strings.Contains(cond.Message, "Widget/"+ns+"/gear: Failed")
	})
	t.Logf("failed:\n%s", describeStatus(st))

	setStatus(widget, "gear", map[string]any{"phase": "Ready"}, false)
	setStatus(vcjob, "train", map[string]any{"state": map[string]any{"phase": "Failed"}}, true)
	st = a.waitStatus(2*time.Minute, "unit custom failed by the Volcano Job's check", func(st *status.ClusterStatus) bool {
		cond := condOf(unitOf(st, "custom").Conditions, status.ConditionReady)
		return cond != nil && cond.Reason == status.ReasonHealthCheckFailed && strings.Contains(cond.Message, "Job/"+ns+"/train: Failed") &&
			!strings.Contains(cond.Message, "Widget")
	})
	t.Logf("failed:\n%s", describeStatus(st))

	setStatus(vcjob, "train", map[string]any{"state": map[string]any{"phase": "Completed"}}, true)
	st = a.waitStatus(2*time.Minute, "unit custom Ready by its checks", func(st *status.ClusterStatus) bool {
		return unitIsReady(unitOf(st, "custom"))
	})
	t.Logf("ready:\n%s", describeStatus(st))
}
