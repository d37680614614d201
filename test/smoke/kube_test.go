package smoke_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/flotilla-gitops/flotilla/test/testenv"
)

var nsCounter atomic.Int64

// kwok never pulls or runs images; any name would do, a real one reads better.
const pauseImage = "registry.k8s.io/pause:3.10"

// eventually polls cond until it reports done or the timeout passes, then
// fails with cond's last description of the state it saw.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		done, state := cond(ctx)
		cancel()
		if done {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s; last state: %s", what, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// testNamespace creates a uniquely named namespace, so the suite can run
// repeatedly (-count) against the one shared cluster.
func testNamespace(t *testing.T, c *testenv.Cluster, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", prefix, nsCounter.Add(1))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := c.CreateNamespace(ctx, name); err != nil {
		t.Fatal(err)
	}
	return name
}

func nodeMap(ctx context.Context, t *testing.T, cl client.Client) map[string]corev1.Node {
	t.Helper()
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Node{}
	for _, n := range nodes.Items {
		out[n.Name] = n
	}
	return out
}

// TestFakeNodesMatchSpec: kwok adopted every requested node and kept the
// capacity, labels and taints testenv asked for.
func TestFakeNodesMatchSpec(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	nodes := nodeMap(t.Context(), t, c.Client())
	for _, spec := range sharedNodes() {
		n, ok := nodes[spec.Name]
		if !ok {
			t.Errorf("node %s missing", spec.Name)
			continue
		}
		if !isReady(n) {
			t.Errorf("node %s not Ready: %v", spec.Name, n.Status.Conditions)
		}
		if n.Labels["type"] != "kwok" {
			t.Errorf("node %s labels %v", spec.Name, n.Labels)
		}
		gpu := n.Status.Allocatable[testenv.GPUResource]
		if gpu.Value() != int64(spec.GPUs) {
			t.Errorf("node %s allocatable GPUs %s, want %d", spec.Name, gpu.String(), spec.GPUs)
		}
		if !strings.HasPrefix(n.Status.NodeInfo.KubeletVersion, "kwok-") {
			t.Errorf("node %s kubelet %q: not managed by kwok", spec.Name, n.Status.NodeInfo.KubeletVersion)
		}
	}
	if tn := nodes[taintedNode]; !hasTaint(tn, infraTaint) {
		t.Errorf("node %s taints %v, want %v", taintedNode, tn.Spec.Taints, infraTaint)
	}
}

func isReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n corev1.Node, want corev1.Taint) bool {
	for _, tt := range n.Spec.Taints {
		if tt.Key == want.Key && tt.Value == want.Value && tt.Effect == want.Effect {
			return true
		}
	}
	return false
}

// TestDeploymentBecomesAvailableOnKwokNodes: the controller manager creates
// the ReplicaSet and pods, kube-scheduler binds them to fake nodes (never
// the tainted one), kwok runs them, and the Deployment reports Available.
func TestDeploymentBecomesAvailableOnKwokNodes(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cl := c.Client()
	ns := testNamespace(t, c, "smoke-deploy")
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "web",
					Image: pauseImage,
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
					}},
				}}},
			},
		},
	}
	if err := cl.Create(t.Context(), dep); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "Deployment Available with 3 ready replicas", func(ctx context.Context) (bool, string) {
		var got appsv1.Deployment
		if err := cl.Get(ctx, client.ObjectKeyFromObject(dep), &got); err != nil {
			return false, err.Error()
		}
		available := false
		for _, cond := range got.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				available = true
			}
		}
		return available && got.Status.ReadyReplicas == 3 && got.Status.AvailableReplicas == 3,
			fmt.Sprintf("available=%v status=%+v", available, got.Status)
	})

	var pods corev1.PodList
	if err := cl.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Fatalf("%d pods, want 3", len(pods.Items))
	}
	nodes := nodeMap(t.Context(), t, cl)
	for _, p := range pods.Items {
		node, ok := nodes[p.Spec.NodeName]
		switch {
		case !ok:
			t.Errorf("pod %s bound to %q, not a known node", p.Name, p.Spec.NodeName)
		case node.Annotations["kwok.x-k8s.io/node"] != "fake":
			t.Errorf("pod %s on node %s which kwok does not manage", p.Name, p.Spec.NodeName)
		case p.Spec.NodeName == taintedNode:
			t.Errorf("pod %s scheduled onto tainted node %s without a toleration", p.Name, taintedNode)
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			t.Errorf("pod %s phase %s ip %q, want Running with an IP", p.Name, p.Status.Phase, p.Status.PodIP)
		}
		if p.Spec.SchedulerName != corev1.DefaultSchedulerName {
			t.Errorf("pod %s scheduler %q", p.Name, p.Spec.SchedulerName)
		}
	}
}

// volcanoJob builds a Job with everything Volcano's (absent) admission
// webhook would default set explicitly: scheduler, queue, retries, task
// names and per-task minAvailable.
func volcanoJob(ns, name string, minAvailable int32, tasks ...batchv1alpha1.TaskSpec) *batchv1alpha1.Job {
	return &batchv1alpha1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1alpha1.JobSpec{
			SchedulerName: testenv.VolcanoSchedulerName,
			Queue:         testenv.VolcanoDefaultQueue,
			MinAvailable:  minAvailable,
			MaxRetry:      3,
			Tasks:         tasks,
		},
	}
}

func task(name string, replicas int32, gpus int64) batchv1alpha1.TaskSpec {
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	if gpus > 0 {
		// The request must be explicit: Volcano sums template requests into the
		// PodGroup's minResources and would not count a limit-only GPU.
		gpu := *resource.NewQuantity(gpus, resource.DecimalSI)
		res.Requests[testenv.GPUResource] = gpu
		res.Limits = corev1.ResourceList{testenv.GPUResource: gpu}
	}
	return batchv1alpha1.TaskSpec{
		Name:         name,
		Replicas:     replicas,
		MinAvailable: ptr.To(replicas),
		MaxRetry:     3,
		Template: corev1.PodTemplateSpec{
			// Without it kwok completes Job-owned pods as soon as they run.
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{testenv.KeepRunningAnnotation: "true"}},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyOnFailure,
				Containers:    []corev1.Container{{Name: name, Image: pauseImage, Resources: res}},
			},
		},
	}
}

func jobPods(ctx context.Context, cl client.Client, ns, job string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{batchv1alpha1.JobNameKey: job})
	return pods.Items, err
}

// jobPodGroup returns the PodGroup the job controller created for job
// (named <job>-<uid> in Volcano v1.10), or nil while there is none.
func jobPodGroup(ctx context.Context, cl client.Client, ns string, job *batchv1alpha1.Job) (*schedulingv1beta1.PodGroup, error) {
	var pgs schedulingv1beta1.PodGroupList
	if err := cl.List(ctx, &pgs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for i := range pgs.Items {
		for _, ref := range pgs.Items[i].OwnerReferences {
			if ref.UID == job.UID {
				return &pgs.Items[i], nil
			}
		}
	}
	return nil, nil
}

// TestVolcanoGangIsScheduled: a 1 ps + 2 GPU worker job with minAvailable 3
// gets all three pods bound by vc-scheduler and Running, the workers on GPU
// nodes, and its PodGroup and Job reach Running.
func TestVolcanoGangIsScheduled(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cl := c.Client()
	ns := testNamespace(t, c, "smoke-gang")
	job := volcanoJob(ns, "tf-train", 3, task("ps", 1, 0), task("worker", 2, 1))
	if err := cl.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "3 job pods bound and Running", func(ctx context.Context) (bool, string) {
		pods, err := jobPods(ctx, cl, ns, job.Name)
		if err != nil {
			return false, err.Error()
		}
		running := 0
		var states []string
		for _, p := range pods {
			states = append(states, fmt.Sprintf("%s node=%q %s", p.Name, p.Spec.NodeName, p.Status.Phase))
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return len(pods) == 3 && running == 3, strings.Join(states, "; ")
	})

	pods, err := jobPods(t.Context(), cl, ns, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	nodes := nodeMap(t.Context(), t, cl)
	tasks := map[string]int{}
	for _, p := range pods {
		taskName := p.Annotations[batchv1alpha1.TaskSpecKey]
		tasks[taskName]++
		if p.Spec.SchedulerName != testenv.VolcanoSchedulerName {
			t.Errorf("pod %s scheduler %q, want volcano", p.Name, p.Spec.SchedulerName)
		}
		if taskName == "worker" {
			gpus := nodes[p.Spec.NodeName].Status.Allocatable[testenv.GPUResource]
			if gpus.Value() < 1 {
				t.Errorf("worker %s on node %s without GPUs", p.Name, p.Spec.NodeName)
			}
		}
	}
	if tasks["ps"] != 1 || tasks["worker"] != 2 {
		t.Errorf("pods per task %v, want ps:1 worker:2", tasks)
	}

	eventually(t, 2*time.Minute, "PodGroup and Job Running", func(ctx context.Context) (bool, string) {
		var got batchv1alpha1.Job
		if err := cl.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
			return false, err.Error()
		}
		pg, err := jobPodGroup(ctx, cl, ns, &got)
		if err != nil || pg == nil {
			return false, fmt.Sprintf("podgroup: %v", err)
		}
		return pg.Status.Phase == schedulingv1beta1.PodGroupRunning && pg.Spec.MinMember == 3 &&
				got.Status.State.Phase == batchv1alpha1.Running,
			fmt.Sprintf("podgroup phase=%s minMember=%d running=%d; job phase=%s", pg.Status.Phase, pg.Spec.MinMember, pg.Status.Running, got.Status.State.Phase)
	})
}

// TestVolcanoGangTooLargeStaysPending: 4 workers × 2 GPUs with minAvailable 4
// need 8 GPUs where the cluster has 4. Volcano must not place part of the
// gang: over several scheduling cycles the PodGroup stays Pending and no pod
// is bound (Volcano v1.10's job controller creates no pods before the
// PodGroup is Inqueue, so there are none at all). Adding GPU capacity then
// lets the same job run, proving capacity was the only obstacle.
func TestVolcanoGangTooLargeStaysPending(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cl := c.Client()
	ns := testNamespace(t, c, "smoke-toolarge")

	var totalGPUs int64
	for _, n := range nodeMap(t.Context(), t, cl) {
		q := n.Status.Allocatable[testenv.GPUResource]
		totalGPUs += q.Value()
	}
	if totalGPUs != gpuNodes*gpusPerNode {
		t.Fatalf("cluster has %d GPUs, test assumes %d", totalGPUs, gpuNodes*gpusPerNode)
	}

	job := volcanoJob(ns, "too-big", 4, task("worker", 4, 2))
	if err := cl.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "PodGroup created by the job controller", func(ctx context.Context) (bool, string) {
		pg, err := jobPodGroup(ctx, cl, ns, job)
		return err == nil && pg != nil, fmt.Sprintf("err=%v", err)
	})

	// vc-scheduler runs a cycle every second: watch eight of them.
	const window = 8 * time.Second
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		pg, err := jobPodGroup(t.Context(), cl, ns, job)
		if err != nil || pg == nil {
			t.Fatalf("podgroup: %v, %v", pg, err)
		}
		if pg.Status.Phase != schedulingv1beta1.PodGroupPending && pg.Status.Phase != "" {
			t.Fatalf("podgroup of a gang needing %d GPUs of %d reached phase %s", 8, totalGPUs, pg.Status.Phase)
		}
		pods, err := jobPods(t.Context(), cl, ns, job.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				t.Fatalf("pod %s of an unschedulable gang bound to %s", p.Name, p.Spec.NodeName)
			}
		}
		if len(pods) != 0 {
			t.Fatalf("job controller created %d pods for a Pending PodGroup", len(pods))
		}
	}
	pg, err := jobPodGroup(t.Context(), cl, ns, job)
	if err != nil || pg == nil {
		t.Fatalf("podgroup: %v, %v", pg, err)
	}
	if pg.Status.Phase != schedulingv1beta1.PodGroupPending {
		t.Errorf("podgroup phase %q after %s, want Pending", pg.Status.Phase, window)
	}
	if pg.Spec.MinMember != 4 {
		t.Errorf("podgroup minMember %d, want 4", pg.Spec.MinMember)
	}
	if gpus := pg.Spec.MinResources.Name(testenv.GPUResource, resource.DecimalSI); gpus.Value() != 8 {
		t.Errorf("podgroup minResources GPUs %s, want 8", gpus.String())
	}
	// The scheduler did look at the gang and turned it away (not merely
	// ignored it): its enqueue action records why on the PodGroup.
	var events corev1.EventList
	if err := cl.List(t.Context(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	rejected := false
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "PodGroup" && e.InvolvedObject.Name == pg.Name && e.Reason == string(schedulingv1beta1.PodGroupUnschedulableType) {
			rejected = true
			t.Logf("scheduler event on podgroup: %s: %s", e.Reason, e.Message)
		}
	}
	if !rejected {
		t.Errorf("no %s event on podgroup %s from vc-scheduler", schedulingv1beta1.PodGroupUnschedulableType, pg.Name)
	}

	// Two more nodes with 4 GPUs each fit the gang (2 workers per node) even
	// while TestVolcanoGangIsScheduled holds 2 of the original GPUs.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	extra := testenv.GPUNodes("gpu-extra", 2, 4)
	t.Cleanup(func() {
		// Leave the shared cluster as the other tests (and -count reruns) expect it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cl.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Errorf("delete job: %v", err)
		}
		for _, n := range extra {
			if err := cl.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}); err != nil {
				t.Errorf("delete node %s: %v", n.Name, err)
			}
		}
	})
	if err := c.AddNodes(ctx, extra...); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "gang scheduled once capacity exists", func(ctx context.Context) (bool, string) {
		pods, err := jobPods(ctx, cl, ns, job.Name)
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 4, fmt.Sprintf("%d pods, %d running", len(pods), running)
	})
}

// TestVolcanoJobCompletesOnKwok: without testenv.KeepRunningAnnotation,
// kwok finishes Job-owned pods as soon as they run, so a Volcano Job goes
// all the way to Completed, which later job-status tests rely on.
func TestVolcanoJobCompletesOnKwok(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cl := c.Client()
	ns := testNamespace(t, c, "smoke-complete")
	tk := task("main", 1, 0)
	tk.Template.Annotations = nil
	job := volcanoJob(ns, "one-shot", 1, tk)
	if err := cl.Create(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "Job Completed", func(ctx context.Context) (bool, string) {
		var got batchv1alpha1.Job
		if err := cl.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
			return false, err.Error()
		}
		return got.Status.State.Phase == batchv1alpha1.Completed && got.Status.Succeeded == 1,
			fmt.Sprintf("phase=%s succeeded=%d", got.Status.State.Phase, got.Status.Succeeded)
	})
	pods, err := jobPods(t.Context(), cl, ns, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].Spec.NodeName == "" || pods[0].Status.Phase != corev1.PodSucceeded {
		t.Errorf("pods %d, want one bound and Succeeded", len(pods))
	}
}
