package volcano_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/volcano"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// The Manager against a real API server with Volcano's CRDs but without
// its controllers: nothing runs the jobs, so the tests set job phases
// themselves through the status subresource.

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

type env struct {
	c       *testenv.Cluster
	k       client.Client
	applier *apply.Applier
	m       *volcano.Manager
	now     time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	e := &env{c: c, k: c.Client(), now: time.Now()}

	// Without the CRDs the cluster has no Volcano.
	applier, err := apply.New(c.RESTConfig(), apply.Options{InventoryNamespace: "default", Cluster: "m"})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := volcano.NewManager(c.RESTConfig(), volcano.Options{Applier: applier})
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.Installed(ctx(t)); !errors.Is(err, volcano.ErrNotInstalled) {
		t.Fatalf("Installed() without CRDs = %v, want ErrNotInstalled", err)
	}
	rep, err := bare.Report(ctx(t), nil)
	if err != nil || len(rep.Jobs) != 0 || rep.Capacity == nil || len(rep.Capacity.Queues) != 0 {
		t.Fatalf("Report() without Volcano = %+v, %v", rep, err)
	}

	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	crds, err := filepath.Glob(filepath.Join(bin, "volcano", "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("volcano CRDs: %v", err)
	}
	if err := c.ApplyCRDFiles(ctx(t), crds...); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"ml", "flotilla-system"} {
		if err := c.CreateNamespace(ctx(t), ns); err != nil {
			t.Fatal(err)
		}
	}
	// No controller-manager: the pod of the test needs its ServiceAccount.
	if err := e.k.Create(ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "ml"}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"gpu-0", "gpu-1"} {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("32Gi"), "pods": resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("2")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		if err := e.k.Create(ctx(t), node); err != nil {
			t.Fatal(err)
		}
		// Status is not taken from a create; set it like a kubelet.
		node.Status = corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("32Gi"), "pods": resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("2")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}
		if err := e.k.Status().Update(ctx(t), node); err != nil {
			t.Fatal(err)
		}
		// Admission taints new nodes not-ready; no lifecycle controller
		// lifts it here.
		if err := e.k.Get(ctx(t), client.ObjectKeyFromObject(node), node); err != nil {
			t.Fatal(err)
		}
		node.Spec.Taints = nil
		if err := e.k.Update(ctx(t), node); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []*schedulingv1beta1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: schedulingv1beta1.QueueSpec{Weight: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Spec: schedulingv1beta1.QueueSpec{Weight: 1, Capability: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}},
	} {
		if err := e.k.Create(ctx(t), q); err != nil {
			t.Fatal(err)
		}
	}
	e.applier, err = apply.New(c.RESTConfig(), apply.Options{InventoryNamespace: "flotilla-system", Cluster: "m"})
	if err != nil {
		t.Fatal(err)
	}
	e.m, err = volcano.NewManager(c.RESTConfig(), volcano.Options{Applier: e.applier, DeleteWait: 5 * time.Second, Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// job renders a job unit's object: workers × gpus, on queue.
func job(t *testing.T, name, queue string, workers, gpus int, setting string, recreate bool) *unstructured.Unstructured {
	t.Helper()
	ann := ""
	if recreate {
		ann = "\n  annotations: {flotilla.dev/recreate: \"true\"}"
	}
	doc := `apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: ` + name + `
  namespace: ml` + ann + `
spec:
  schedulerName: volcano
  queue: ` + queue + `
  minAvailable: ` + itoa(workers) + `
  tasks:
    - name: worker
      replicas: ` + itoa(workers) + `
      minAvailable: ` + itoa(workers) + `
      template:
        spec:
          containers:
            - name: w
              image: registry.k8s.io/pause:3.10
              env: [{name: SETTING, value: "` + setting + `"}]
              resources:
                requests: {cpu: 500m, memory: 256Mi, nvidia.com/gpu: "` + itoa(gpus) + `"}
`
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func itoa(i int) string {
	return strings.TrimSpace(resource.NewQuantity(int64(i), resource.DecimalSI).String())
}

func (e *env) submit(t *testing.T, unit string, obj *unstructured.Unstructured) (*volcano.JobResult, error) {
	t.Helper()
	return e.m.SubmitJob(ctx(t), volcano.JobRequest{
		Unit: unit, Revision: "main@sha1:" + volcano.SpecHash(obj)[7:47], Hash: volcano.SpecHash(obj), Objects: []*unstructured.Unstructured{obj}, Prune: true, Timeout: time.Minute,
	})
}

func (e *env) live(t *testing.T, name string) *batchv1alpha1.Job {
	t.Helper()
	j := &batchv1alpha1.Job{}
	if err := e.k.Get(ctx(t), types.NamespacedName{Namespace: "ml", Name: name}, j); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil
		}
		t.Fatal(err)
	}
	return j
}

// setPhase does what vc-controller-manager would: the job's state.
func (e *env) setPhase(t *testing.T, name string, phase batchv1alpha1.JobPhase, at time.Time) {
	t.Helper()
	j := e.live(t, name)
	j.Status.State = batchv1alpha1.JobState{Phase: phase, LastTransitionTime: metav1.NewTime(at)}
	j.Status.Conditions = append(j.Status.Conditions, batchv1alpha1.JobCondition{Status: phase, LastTransitionTime: &metav1.Time{Time: at}})
	if err := e.k.Status().Update(ctx(t), j); err != nil {
		t.Fatal(err)
	}
}

func TestManager(t *testing.T) {
	e := newEnv(t)

	// A gang that fits is created once, with its spec hash and verdict.
	train := job(t, "train", "default", 2, 1, "a", false)
	res, err := e.submit(t, "job-train", train)
	if err != nil || res.Action != volcano.ActionCreated || !res.Ready || res.Preflight.Verdict != volcano.Fits {
		t.Fatalf("first submit = %+v, %v", res, err)
	}
	live := e.live(t, "train")
	if live == nil || live.Annotations[volcano.AnnotationSpecHash] != volcano.SpecHash(train) || live.Annotations[volcano.AnnotationPreflight] != "Fits" ||
		live.Labels[apply.LabelUnit] != "job-train" {
		t.Fatalf("live job %+v", live)
	}
	uid := live.UID
	if res, err := e.submit(t, "job-train", train); err != nil || res.Action != volcano.ActionUnchanged || !res.Ready {
		t.Fatalf("same spec again = %+v, %v", res, err)
	}

	// A running job whose spec changed is left as is and reported.
	e.setPhase(t, "train", batchv1alpha1.Running, e.now)
	changed := job(t, "train", "default", 2, 1, "b", false)
	res, err = e.submit(t, "job-train", changed)
	if err != nil || res.Action != volcano.ActionKept || res.Ready || res.Reason != volcano.ReasonSpecChanged || res.Message != volcano.MessageSpecChanged {
		t.Fatalf("changed spec while running = %+v, %v", res, err)
	}
	if l := e.live(t, "train"); l.UID != uid || l.Annotations[volcano.AnnotationSpecHash] != volcano.SpecHash(train) {
		t.Fatal("the running job was touched")
	}
	rep, err := e.m.Report(ctx(t), []string{"job-train"})
	if err != nil || len(rep.Jobs) != 1 || rep.Jobs[0].Phase != "Running" || rep.Jobs[0].Message != volcano.MessageSpecChanged || rep.Jobs[0].StartTime == nil {
		t.Fatalf("report = %+v, %v", rep, err)
	}

	// A completed job with the same spec is never re-run; deleted by
	// someone, it is not created again either.
	e.setPhase(t, "train", batchv1alpha1.Completed, e.now)
	if res, err := e.submit(t, "job-train", train); err != nil || res.Action != volcano.ActionUnchanged {
		t.Fatalf("completed job, same spec = %+v, %v", res, err)
	}
	if err := e.k.Delete(ctx(t), e.live(t, "train")); err != nil {
		t.Fatal(err)
	}
	res, err = e.submit(t, "job-train", train)
	if err != nil || res.Action != volcano.ActionGone || !res.Ready || e.live(t, "train") != nil {
		t.Fatalf("deleted completed job = %+v, %v (must not be re-run)", res, err)
	}
	// A new spec is a new run.
	if res, err := e.submit(t, "job-train", changed); err != nil || res.Action != volcano.ActionCreated || e.live(t, "train") == nil {
		t.Fatalf("new spec after deletion = %+v, %v", res, err)
	}

	// 4 workers × 2 GPUs on 4 GPUs: Unschedulable, nothing created.
	res, err = e.submit(t, "job-big", job(t, "big", "default", 4, 2, "a", false))
	if err != nil || res.Action != volcano.ActionNotSubmitted || res.Ready || res.Reason != volcano.ReasonUnschedulable ||
		!strings.Contains(res.Message, "needs 8 nvidia.com/gpu, schedulable nodes have 4") {
		t.Fatalf("oversized gang = %+v, %v", res, err)
	}
	if e.live(t, "big") != nil {
		t.Fatal("an Unschedulable job was created")
	}
	// The queue's capability counts too; a missing queue is reported.
	if res, _ := e.submit(t, "job-q", job(t, "q", "small", 1, 2, "a", false)); res == nil || res.Action != volcano.ActionNotSubmitted || !strings.Contains(res.Message, "queue small capability is 1 nvidia.com/gpu") {
		t.Fatalf("over the queue's capability = %+v", res)
	}
	if res, _ := e.submit(t, "job-nq", job(t, "nq", "nosuch", 1, 1, "a", false)); res == nil || !strings.Contains(res.Message, "queue nosuch does not exist") {
		t.Fatalf("missing queue = %+v", res)
	}

	// GPUs held by a bound pod: a gang that fits the cluster but not what
	// is free now is submitted, Waiting.
	hog := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "ml"},
		Spec: corev1.PodSpec{NodeName: "gpu-0", Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}, Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}},
	}
	if err := e.k.Create(ctx(t), hog); err != nil {
		t.Fatal(err)
	}
	res, err = e.submit(t, "job-wait", job(t, "wait", "default", 2, 2, "a", false))
	if err != nil || res.Action != volcano.ActionCreated || res.Preflight.Verdict != volcano.Waiting || e.live(t, "wait") == nil {
		t.Fatalf("gang waiting for GPUs = %+v, %v", res, err)
	}

	rep, err = e.m.Report(ctx(t), []string{"job-train", "job-big", "job-wait"})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i, j := range rep.Jobs {
		byName[j.Name] = i
	}
	if i, ok := byName["big"]; !ok || rep.Jobs[i].Phase != volcano.PhaseNotSubmitted || rep.Jobs[i].Preflight != "Unschedulable" {
		t.Errorf("report lacks the NotSubmitted job: %+v", rep.Jobs)
	}
	if i, ok := byName["wait"]; !ok || rep.Jobs[i].Preflight != "Waiting" || rep.Jobs[i].Phase != "Pending" {
		t.Errorf("report of the waiting job: %+v", rep.Jobs)
	}
	if _, ok := byName["q"]; ok {
		t.Errorf("a unit not in the slice is reported: %+v", rep.Jobs)
	}
	c := rep.Capacity
	if c.ReadyNodes != 2 || c.Allocatable["nvidia.com/gpu"] != "4" || c.Free["nvidia.com/gpu"] != "2" || c.Allocatable["cpu"] != "16" {
		t.Errorf("capacity %+v", c)
	}
	if len(c.Queues) != 2 || c.Queues[1].Name != "small" || c.Queues[1].Capability["nvidia.com/gpu"] != "1" {
		t.Errorf("queues %+v", c.Queues)
	}

	// A job of the unit's name that flotilla did not create is left alone.
	foreign := &batchv1alpha1.Job{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: "ml"}, Spec: batchv1alpha1.JobSpec{Queue: "default", MinAvailable: 1,
		Tasks: []batchv1alpha1.TaskSpec{{Name: "w", Replicas: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}}}
	if err := e.k.Create(ctx(t), foreign); err != nil {
		t.Fatal(err)
	}
	if _, err := e.submit(t, "job-foreign", job(t, "foreign", "default", 1, 0, "a", false)); !errors.Is(err, volcano.ErrNotOwned) {
		t.Fatalf("foreign job: %v, want ErrNotOwned", err)
	}

	// Not exactly one Job: invalid unit.
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "ml"}}}
	if _, err := e.m.SubmitJob(ctx(t), volcano.JobRequest{Unit: "job-x", Objects: []*unstructured.Unstructured{cm}}); !errors.Is(err, volcano.ErrInvalidUnit) {
		t.Fatalf("a ConfigMap as a job: %v", err)
	}

	// Retention of removed units: finished recently → kept; long ago or
	// still active → deleted.
	e.setPhase(t, "train", batchv1alpha1.Completed, e.now.Add(-10*time.Minute))
	if keep, err := e.m.RetainRemoved(ctx(t), "job-train"); err != nil || !keep {
		t.Fatalf("recently finished: keep=%v %v", keep, err)
	}
	e.now = e.now.Add(2 * time.Hour)
	if keep, err := e.m.RetainRemoved(ctx(t), "job-train"); err != nil || keep {
		t.Fatalf("finished over an hour ago: keep=%v %v", keep, err)
	}
	if keep, err := e.m.RetainRemoved(ctx(t), "job-wait"); err != nil || keep {
		t.Fatalf("active job: keep=%v %v", keep, err)
	}
	if keep, err := e.m.RetainRemoved(ctx(t), "job-none"); err != nil || keep {
		t.Fatalf("unit without inventory: keep=%v %v", keep, err)
	}
}

func TestSpecHash(t *testing.T) {
	a := job(t, "train", "default", 2, 1, "a", false)
	b := job(t, "train", "default", 2, 1, "a", true)
	b.SetAnnotations(map[string]string{volcano.AnnotationRecreate: "true", volcano.AnnotationSpecHash: "x", volcano.AnnotationPreflight: "Fits"})
	if volcano.SpecHash(a) != volcano.SpecHash(b) {
		t.Error("flotilla's own annotations changed the spec hash")
	}
	if volcano.SpecHash(a) == volcano.SpecHash(job(t, "train", "default", 2, 1, "b", false)) {
		t.Error("a different env value kept the spec hash")
	}
	if !strings.HasPrefix(volcano.SpecHash(a), "sha256:") || len(volcano.SpecHash(a)) != 71 {
		t.Errorf("spec hash %q", volcano.SpecHash(a))
	}
}
