package e2e_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// TestHelmHooks: a chart's hooks run as Helm runs them, through the real
// agent on a live cluster. On install the pre-install migration Job runs
// (and is waited for) before the Deployment exists; a values change that
// alters the migration Job succeeds on upgrade because before-hook-creation
// replaces the Job instead of applying to its immutable pod template; the
// post-upgrade Job runs only once the Deployment is Ready; a failing
// pre-upgrade Job fails the unit with the Job's name and reason, the
// Deployment is not updated, and the hook is not re-run by later cycles.
func TestHelmHooks(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	const (
		cluster = "hooks"
		ns      = "hooks-e2e"
		// nodeLabel is put on one node mid-test so that the upgraded
		// Deployment's pods can schedule.
		nodeLabel = "hooks-e2e.flotilla.dev/ready"
		node      = "kwok-node-0"
	)
	dir := t.TempDir()
	planCopyDir(t, filepath.Join("testdata", "hooks-chart"), filepath.Join(dir, "charts", "hooks"))
	writeUnits := func(values string) {
		writeHandSlice(t, dir, cluster, []handUnit{
			{name: "hooks-ns", files: map[string]string{
				"kustomization.yaml": "resources: [ns.yaml]\n",
				"ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n",
			}},
			{name: "app", kind: slice.UnitHelm, namespace: ns, wait: true, dependsOn: []string{"hooks-ns"},
				helm:  &slice.HelmRelease{Chart: "charts/hooks", ReleaseName: "app"},
				files: map[string]string{"values.yaml": values}},
		})
	}
	writeUnits("version: \"1\"\nholdMigration: true\n")
	repo := fleetrepo.New(t, agentGit(t), cluster, dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	a.start()
	defer a.stop()
	t.Cleanup(func() { labelNode(t, k, node, nodeLabel, "") })

	job := func(name string) (*batchv1.Job, error) {
		j := &batchv1.Job{}
		return j, k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: name}, j)
	}
	deployment := func() (*appsv1.Deployment, error) { return getDeployment(t, k, ns, "app-web") }

	// Install: the migration Job runs first; its pod is held Running, and
	// while it runs the Deployment does not exist.
	var pod corev1.Pod
	waitFor(t, 2*time.Minute, "the pre-install Job's pod Running", func() (bool, string) {
		var pods corev1.PodList
		if err := k.List(testCtx(t), &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": "app-migrate"}); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				pod = p
				return true, ""
			}
		}
		return false, statusText(a)
	})
	if _, err := deployment(); !apierrors.IsNotFound(err) {
		t.Fatalf("Deployment exists while the pre-install hook runs: %v", err)
	}
	// A merge patch: kwok writes the pod's status meanwhile.
	held := client.MergeFrom(pod.DeepCopy())
	delete(pod.Annotations, testenv.KeepRunningAnnotation)
	if err := k.Patch(testCtx(t), &pod, held); err != nil {
		t.Fatal(err)
	}
	st := a.waitApplied(2*time.Minute, repo.Head())
	t.Logf("installed:\n%s", describeStatus(st))
	installed, err := job("app-migrate")
	if err != nil || !jobComplete(installed) {
		t.Fatalf("pre-install Job not complete: %v %+v", err, installed.Status)
	}
	if _, err := deployment(); err != nil {
		t.Fatalf("Deployment after install: %v", err)
	}
	if _, err := job("app-notify"); !apierrors.IsNotFound(err) {
		t.Fatalf("post-upgrade hook ran on install: %v", err)
	}
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "app-test"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("test hook applied: %v", err)
	}
	// Hooks are not the unit's objects: not in its inventory (so never
	// pruned or drift), and the unit counts only the Deployment.
	inv, err := a.applier.Inventory(testCtx(t), "app")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range inv.Entries {
		if e.ID.GroupKind.Kind != "Deployment" {
			t.Errorf("inventory holds %s", e.Subject())
		}
	}

	// Upgrade: a new version alters the migration Job's pod template. It
	// is replaced (before-hook-creation) and runs before the Deployment
	// changes; the Deployment's pods cannot schedule yet, so it is not
	// Ready and the post-upgrade hook must wait.
	writeUnits("version: \"2\"\nnodeSelector: {" + nodeLabel + ": \"true\"}\n")
	rev2 := repo.Push(t, "app 2")
	waitFor(t, 2*time.Minute, "the Deployment at version 2", func() (bool, string) {
		d, err := deployment()
		if err != nil {
			return false, err.Error()
		}
		return d.Annotations["example.com/version"] == "2", statusText(a)
	})
	upgraded, err := job("app-migrate")
	if err != nil || upgraded.UID == installed.UID || !jobComplete(upgraded) || jobEnv(upgraded) != "2" {
		t.Fatalf("pre-upgrade Job not replaced and complete at version 2: %v uid %s→%s env %q %+v", err, installed.UID, upgraded.UID, jobEnv(upgraded), upgraded.Status)
	}
	if d, _ := deployment(); deploymentReady(d) {
		t.Fatal("the Deployment is Ready although no node has the label its pods need")
	}
	if _, err := job("app-notify"); !apierrors.IsNotFound(err) {
		t.Fatalf("post-upgrade hook ran before the unit was Ready: %v", err)
	}
	labelNode(t, k, node, nodeLabel, "true")
	st = a.waitApplied(3*time.Minute, rev2)
	notify, err := job("app-notify")
	if err != nil || !jobComplete(notify) || jobEnv(notify) != "2" {
		t.Fatalf("post-upgrade Job after Ready: %v %+v", err, notify)
	}
	if u := unitOf(st, "app"); u == nil || strings.Contains(u.LastError, "immutable") {
		t.Fatalf("upgrade:\n%s", describeStatus(st))
	}

	// A failing pre-upgrade hook fails the unit and stops it.
	writeUnits("version: \"3\"\nnodeSelector: {" + nodeLabel + ": \"true\"}\nfailMigration: true\n")
	repo.Push(t, "app 3, failing migration")
	want := "pre-upgrade hook Job/" + ns + "/app-migrate failed: DeadlineExceeded"
	st = a.waitStatus(2*time.Minute, "the unit failed with its hook", func(st *status.ClusterStatus) bool {
		u := unitOf(st, "app")
		c := condOf(u.Conditions, status.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == status.ReasonHookFailed && strings.Contains(u.LastError, want)
	})
	t.Logf("failed hook: %s", unitOf(st, "app").LastError)
	failed, err := job("app-migrate")
	if err != nil {
		t.Fatal(err)
	}
	// Later cycles report the failure again without re-running the hook,
	// and the Deployment stays at version 2.
	a.stop()
	for range 2 {
		st = a.cycle()
		if u := unitOf(st, "app"); !strings.Contains(u.LastError, want) {
			t.Fatalf("cycle after the failure:\n%s", describeStatus(st))
		}
	}
	if again, err := job("app-migrate"); err != nil || again.UID != failed.UID {
		t.Fatalf("failed hook re-run without a new revision: %v", err)
	}
	if d, err := deployment(); err != nil || d.Annotations["example.com/version"] != "2" {
		t.Fatalf("Deployment updated past a failed pre-upgrade hook: %v %v", err, d.Annotations)
	}
}

// statusText describes the agent's last status, if any.
func statusText(a *inprocAgent) string {
	if st := a.loop.Status(); st != nil {
		return describeStatus(st)
	}
	return "no status yet"
}

func jobComplete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobEnv(j *batchv1.Job) string {
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "VERSION" {
			return e.Value
		}
	}
	return ""
}

// deploymentReady: rolled out, as kstatus counts it (no old pod left).
func deploymentReady(d *appsv1.Deployment) bool {
	want := *d.Spec.Replicas
	return d.Status.ObservedGeneration == d.Generation && d.Status.Replicas == want &&
		d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want
}

// labelNode sets (value "" removes) one label of a node.
func labelNode(t *testing.T, k client.Client, name, key, value string) {
	t.Helper()
	n := &corev1.Node{}
	if err := k.Get(testCtx(t), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	// A merge patch: kwok's heartbeats update the node meanwhile.
	before := client.MergeFrom(n.DeepCopy())
	if value == "" {
		delete(n.Labels, key)
	} else {
		n.Labels[key] = value
	}
	if err := k.Patch(testCtx(t), n, before); err != nil {
		t.Fatal(err)
	}
}
