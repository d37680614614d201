package volcano

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/flotilla-gitops/flotilla/pkg/placement"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

type taskOpt func(*batchv1alpha1.TaskSpec)

func withSelector(kv ...string) taskOpt {
	return func(t *batchv1alpha1.TaskSpec) {
		t.Template.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			t.Template.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func withToleration(tol corev1.Toleration) taskOpt {
	return func(t *batchv1alpha1.TaskSpec) {
		t.Template.Spec.Tolerations = append(t.Template.Spec.Tolerations, tol)
	}
}

func withAffinity(req corev1.NodeSelectorRequirement) taskOpt {
	return func(t *batchv1alpha1.TaskSpec) {
		t.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{req},
			}}},
		}}
	}
}

func tk(name string, replicas int32, requests corev1.ResourceList, opts ...taskOpt) batchv1alpha1.TaskSpec {
	t := batchv1alpha1.TaskSpec{
		Name: name, Replicas: replicas, MinAvailable: ptr.To(replicas),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: requests},
		}}}},
	}
	for _, o := range opts {
		o(&t)
	}
	return t
}

func gangOf(min int32, tasks ...batchv1alpha1.TaskSpec) []placement.GangPod {
	spec := batchv1alpha1.JobSpec{MinAvailable: min, Tasks: tasks}
	return placement.Gang(&spec)
}

func node(name string, alloc corev1.ResourceList, requested corev1.ResourceList) NodeInfo {
	return NodeInfo{Name: name, Allocatable: alloc, Requested: requested, Labels: map[string]string{"kubernetes.io/hostname": name}}
}

func gpuNode(name, gpus string) NodeInfo {
	return node(name, rl("cpu", "32", "memory", "256Gi", "pods", "110", "nvidia.com/gpu", gpus), nil)
}

func busy(n NodeInfo, requested corev1.ResourceList) NodeInfo {
	n.Requested = requested
	return n
}

func TestPreflight(t *testing.T) {
	twoGPU := rl("cpu", "500m", "memory", "256Mi", "nvidia.com/gpu", "2")
	oneGPU := rl("cpu", "500m", "memory", "256Mi", "nvidia.com/gpu", "1")
	ps := rl("cpu", "500m", "memory", "256Mi")
	infra := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	tainted := gpuNode("tainted-0", "8")
	tainted.Taints = []corev1.Taint{infra}
	labelled := gpuNode("gpu-a100", "8")
	labelled.Labels["gpu"] = "a100"

	tests := []struct {
		name    string
		gang    []placement.GangPod
		nodes   []NodeInfo
		queue   *QueueInfo
		want    Verdict
		message string // substring
	}{
		{
			name:  "seed tensorflow job fits",
			gang:  gangOf(3, tk("ps", 1, ps), tk("worker", 2, oneGPU)),
			nodes: []NodeInfo{gpuNode("gpu-0", "2"), gpuNode("gpu-1", "2")},
			want:  Fits,
		},
		{
			name:    "4 workers x 2 GPUs on a cluster with 4 GPUs can never fit",
			gang:    gangOf(4, tk("worker", 4, twoGPU)),
			nodes:   []NodeInfo{gpuNode("gpu-0", "2"), gpuNode("gpu-1", "2")},
			want:    Unschedulable,
			message: "gang of 4 pods needs 8 nvidia.com/gpu, schedulable nodes have 4",
		},
		{
			name:    "enough GPUs in total but no node holds one pod",
			gang:    gangOf(2, tk("worker", 2, twoGPU)),
			nodes:   []NodeInfo{gpuNode("gpu-0", "1"), gpuNode("gpu-1", "1"), gpuNode("gpu-2", "1"), gpuNode("gpu-3", "1")},
			want:    Unschedulable,
			message: "a pod of task worker (cpu=500m, memory=256Mi, nvidia.com/gpu=2) fits on no schedulable node",
		},
		{
			name:  "per-node packing: 3 pods of 2 GPUs onto 4+2 GPU nodes",
			gang:  gangOf(3, tk("worker", 3, twoGPU)),
			nodes: []NodeInfo{gpuNode("gpu-0", "4"), gpuNode("gpu-1", "2")},
			want:  Fits,
		},
		{
			name:    "packing fails on fragmented nodes: 3 pods of 2 GPUs onto three 3-GPU nodes fit, onto 3+3 do not",
			gang:    gangOf(3, tk("worker", 3, twoGPU)),
			nodes:   []NodeInfo{gpuNode("gpu-0", "3"), gpuNode("gpu-1", "3")},
			want:    Unschedulable,
			message: "no packing of the gang's 3 pods",
		},
		{
			name:  "millicores: 4 x 250m fill 1 cpu exactly",
			gang:  gangOf(4, tk("w", 4, rl("cpu", "250m"))),
			nodes: []NodeInfo{node("n", rl("cpu", "1"), nil)},
			want:  Fits,
		},
		{
			name:    "millicores: 4 x 251m exceed 1 cpu",
			gang:    gangOf(4, tk("w", 4, rl("cpu", "251m"))),
			nodes:   []NodeInfo{node("n", rl("cpu", "1"), nil)},
			want:    Unschedulable,
			message: "needs 1004m cpu, schedulable nodes have 1",
		},
		{
			name:    "Gi vs G: 1Gi does not fit a 1G node",
			gang:    gangOf(1, tk("w", 1, rl("memory", "1Gi"))),
			nodes:   []NodeInfo{node("n", rl("memory", "1G"), nil)},
			want:    Unschedulable,
			message: "needs 1Gi memory, schedulable nodes have 1G",
		},
		{
			name:  "Gi vs G: 1G fits a 1Gi node",
			gang:  gangOf(1, tk("w", 1, rl("memory", "1G"))),
			nodes: []NodeInfo{node("n", rl("memory", "1Gi"), nil)},
			want:  Fits,
		},
		{
			name:    "pods capacity counts",
			gang:    gangOf(3, tk("w", 3, rl("cpu", "1m"))),
			nodes:   []NodeInfo{node("n", rl("cpu", "4", "pods", "2"), nil)},
			want:    Unschedulable,
			message: "needs 3 pods",
		},
		{
			name:    "a tainted node does not count without a toleration",
			gang:    gangOf(2, tk("worker", 2, twoGPU)),
			nodes:   []NodeInfo{gpuNode("gpu-0", "2"), tainted},
			want:    Unschedulable,
			message: "needs 4 nvidia.com/gpu, schedulable nodes have 2",
		},
		{
			name:  "a tolerated taint counts",
			gang:  gangOf(2, tk("worker", 2, twoGPU, withToleration(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}))),
			nodes: []NodeInfo{gpuNode("gpu-0", "2"), tainted},
			want:  Fits,
		},
		{
			name:  "an Exists toleration without key tolerates everything",
			gang:  gangOf(4, tk("worker", 4, twoGPU, withToleration(corev1.Toleration{Operator: corev1.TolerationOpExists}))),
			nodes: []NodeInfo{tainted},
			want:  Fits,
		},
		{
			name: "a PreferNoSchedule taint does not exclude",
			gang: gangOf(1, tk("w", 1, oneGPU)),
			nodes: func() []NodeInfo {
				n := gpuNode("soft", "1")
				n.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}
				return []NodeInfo{n}
			}(),
			want: Fits,
		},
		{
			name:    "nodeSelector restricts the nodes",
			gang:    gangOf(2, tk("worker", 2, rl("nvidia.com/gpu", "8"), withSelector("gpu", "a100"))),
			nodes:   []NodeInfo{labelled, gpuNode("gpu-0", "8")},
			want:    Unschedulable,
			message: "needs 16 nvidia.com/gpu, schedulable nodes have 8",
		},
		{
			name:  "nodeSelector matching enough nodes",
			gang:  gangOf(2, tk("worker", 2, rl("nvidia.com/gpu", "4"), withSelector("gpu", "a100"))),
			nodes: []NodeInfo{labelled},
			want:  Fits,
		},
		{
			name:    "nodeSelector matching no node",
			gang:    gangOf(1, tk("worker", 1, oneGPU, withSelector("gpu", "h100"))),
			nodes:   []NodeInfo{labelled, gpuNode("gpu-0", "8")},
			want:    Unschedulable,
			message: "no schedulable node can take the gang's pods",
		},
		{
			name:  "required node affinity In",
			gang:  gangOf(1, tk("worker", 1, rl("nvidia.com/gpu", "8"), withAffinity(corev1.NodeSelectorRequirement{Key: "gpu", Operator: corev1.NodeSelectorOpIn, Values: []string{"a100", "h100"}}))),
			nodes: []NodeInfo{gpuNode("gpu-0", "8"), labelled},
			want:  Fits,
		},
		{
			name:    "required node affinity NotIn excludes",
			gang:    gangOf(1, tk("worker", 1, rl("nvidia.com/gpu", "8"), withAffinity(corev1.NodeSelectorRequirement{Key: "gpu", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a100"}}))),
			nodes:   []NodeInfo{labelled, gpuNode("gpu-0", "4")},
			want:    Unschedulable,
			message: "needs 8 nvidia.com/gpu, schedulable nodes have 4",
		},
		{
			name:    "fits the cluster but GPUs are in use: Waiting",
			gang:    gangOf(2, tk("worker", 2, twoGPU)),
			nodes:   []NodeInfo{busy(gpuNode("gpu-0", "2"), rl("cpu", "1", "nvidia.com/gpu", "2", "pods", "1")), gpuNode("gpu-1", "2")},
			want:    Waiting,
			message: "waits for capacity: gang of 2 pods needs 4 nvidia.com/gpu, free now is 2",
		},
		{
			name: "free in total but fragmented now: Waiting",
			gang: gangOf(2, tk("worker", 2, twoGPU)),
			nodes: []NodeInfo{
				busy(gpuNode("gpu-0", "2"), rl("nvidia.com/gpu", "1")),
				busy(gpuNode("gpu-1", "2"), rl("nvidia.com/gpu", "1")),
				gpuNode("gpu-2", "2"),
			},
			want:    Waiting,
			message: "do not fit the free room",
		},
		{
			name:    "queue capability below the gang: Unschedulable",
			gang:    gangOf(3, tk("ps", 1, ps), tk("worker", 2, twoGPU)),
			nodes:   []NodeInfo{gpuNode("gpu-0", "8")},
			queue:   &QueueInfo{Name: "research-queue", Capability: rl("nvidia.com/gpu", "2")},
			want:    Unschedulable,
			message: "gang of 3 pods needs 4 nvidia.com/gpu; queue research-queue capability is 2 nvidia.com/gpu",
		},
		{
			name:    "queue allocated: Waiting",
			gang:    gangOf(2, tk("worker", 2, twoGPU)),
			nodes:   []NodeInfo{gpuNode("gpu-0", "8")},
			queue:   &QueueInfo{Name: "research-queue", Capability: rl("nvidia.com/gpu", "4", "cpu", "100"), Allocated: rl("nvidia.com/gpu", "2")},
			want:    Waiting,
			message: "waits for queue research-queue: gang needs 4 nvidia.com/gpu, the queue has 2 nvidia.com/gpu free",
		},
		{
			name:  "queue without capability does not limit",
			gang:  gangOf(2, tk("worker", 2, twoGPU)),
			nodes: []NodeInfo{gpuNode("gpu-0", "4")},
			queue: &QueueInfo{Name: "default", Allocated: rl("nvidia.com/gpu", "100")},
			want:  Fits,
		},
		{
			name:    "no schedulable node at all",
			gang:    gangOf(1, tk("w", 1, ps)),
			want:    Unschedulable,
			message: "no schedulable node",
		},
		{
			name: "only minAvailable pods count",
			gang: gangOf(2, tk("worker", 8, twoGPU)), // 8 replicas, gang of 2
			nodes: []NodeInfo{
				gpuNode("gpu-0", "2"), gpuNode("gpu-1", "2"),
			},
			want: Fits,
		},
		{name: "empty gang", want: Fits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Preflight(tt.gang, tt.nodes, tt.queue)
			if got.Verdict != tt.want {
				t.Fatalf("Preflight() = %s (%s), want %s", got.Verdict, got.Message, tt.want)
			}
			if !strings.Contains(got.Message, tt.message) {
				t.Fatalf("Preflight() message %q, want it to contain %q", got.Message, tt.message)
			}
			if tt.want == Fits && got.Message != "" {
				t.Fatalf("Preflight() Fits with message %q", got.Message)
			}
		})
	}
}

func TestSchedulableNode(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	notReady := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse}
	tests := []struct {
		name string
		node corev1.Node
		want bool
	}{
		{"ready", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, true},
		{"not ready", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{notReady}}}, false},
		{"cordoned", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, false},
		{"no conditions yet", corev1.Node{}, false},
	}
	for _, tt := range tests {
		if got := SchedulableNode(&tt.node); got != tt.want {
			t.Errorf("%s: SchedulableNode() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
