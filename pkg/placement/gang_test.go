package placement

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func task(name string, replicas int32, minAvail *int32, requests corev1.ResourceList) batchv1alpha1.TaskSpec {
	return batchv1alpha1.TaskSpec{
		Name: name, Replicas: replicas, MinAvailable: minAvail,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Resources: corev1.ResourceRequirements{Requests: requests},
		}}}},
	}
}

// sameResources compares by quantity value, not representation.
func sameResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		o, ok := b[n]
		if !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

func TestGang(t *testing.T) {
	ps := rl("cpu", "1", "memory", "2Gi")
	worker := rl("cpu", "500m", "memory", "1Gi", "nvidia.com/gpu", "1")
	tests := []struct {
		name     string
		spec     batchv1alpha1.JobSpec
		wantPods []string // task/index
		wantSum  corev1.ResourceList
	}{
		{
			name: "seed tensorflow job: 1 ps + 2 workers, minAvailable 3",
			spec: batchv1alpha1.JobSpec{MinAvailable: 3, Tasks: []batchv1alpha1.TaskSpec{
				task("ps", 1, ptr.To[int32](1), ps), task("worker", 2, ptr.To[int32](2), worker)}},
			wantPods: []string{"ps/0", "worker/0", "worker/1"},
			wantSum:  rl("cpu", "2", "memory", "4Gi", "nvidia.com/gpu", "2"),
		},
		{
			name: "job minAvailable smaller than replicas takes tasks in order",
			spec: batchv1alpha1.JobSpec{MinAvailable: 2, Tasks: []batchv1alpha1.TaskSpec{
				task("ps", 1, nil, ps), task("worker", 4, nil, worker)}},
			wantPods: []string{"ps/0", "worker/0"},
			wantSum:  rl("cpu", "1500m", "memory", "3Gi", "nvidia.com/gpu", "1"),
		},
		{
			name: "task minimums first, then fill in order",
			spec: batchv1alpha1.JobSpec{MinAvailable: 3, Tasks: []batchv1alpha1.TaskSpec{
				task("master", 2, ptr.To[int32](1), ps), task("work", 2, ptr.To[int32](1), worker)}},
			wantPods: []string{"master/0", "work/0", "master/1"},
			wantSum:  rl("cpu", "2500m", "memory", "5Gi", "nvidia.com/gpu", "1"),
		},
		{
			name: "job minAvailable unset: sum of task minimums",
			spec: batchv1alpha1.JobSpec{Tasks: []batchv1alpha1.TaskSpec{
				task("master", 2, nil, ps), task("work", 2, ptr.To[int32](1), worker)}},
			wantPods: []string{"work/0", "master/0", "master/1"},
			wantSum:  rl("cpu", "2500m", "memory", "5Gi", "nvidia.com/gpu", "1"),
		},
		{
			name: "job minAvailable below the task minimums stops at it",
			spec: batchv1alpha1.JobSpec{MinAvailable: 1, Tasks: []batchv1alpha1.TaskSpec{
				task("a", 2, ptr.To[int32](2), ps), task("b", 2, ptr.To[int32](2), worker)}},
			wantPods: []string{"a/0"},
			wantSum:  ps,
		},
		{
			name: "minAvailable above replicas is capped",
			spec: batchv1alpha1.JobSpec{MinAvailable: 9, Tasks: []batchv1alpha1.TaskSpec{
				task("w", 2, nil, rl("cpu", "250m"))}},
			wantPods: []string{"w/0", "w/1"},
			wantSum:  rl("cpu", "500m"),
		},
		{
			name:    "no tasks",
			spec:    batchv1alpha1.JobSpec{MinAvailable: 3},
			wantSum: corev1.ResourceList{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gang := Gang(&tt.spec)
			var got []string
			for _, p := range gang {
				got = append(got, fmt.Sprintf("%s/%d", p.Task, p.Index))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantPods) {
				t.Errorf("Gang() pods = %v, want %v", got, tt.wantPods)
			}
			if sum := GangRequests(gang); !sameResources(sum, tt.wantSum) {
				t.Errorf("GangRequests() = %s, want %s", FormatResources(sum), FormatResources(tt.wantSum))
			}
		})
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	tests := []struct {
		name string
		spec corev1.PodSpec
		want corev1.ResourceList
	}{
		{
			name: "sum of containers, millicores and binary units",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "512Mi")}},
				{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "0.75", "memory", "1536Mi")}},
			}},
			want: rl("cpu", "1", "memory", "2Gi"),
		},
		{
			name: "limit stands in for a missing request (GPU limit only)",
			spec: corev1.PodSpec{Containers: []corev1.Container{
				{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1"), Limits: rl("cpu", "2", "nvidia.com/gpu", "2")}},
			}},
			want: rl("cpu", "1", "nvidia.com/gpu", "2"),
		},
		{
			name: "a larger init container wins per resource",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "100Mi")}}},
				Containers:     []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi")}}},
			},
			want: rl("cpu", "2", "memory", "1Gi"),
		},
		{
			name: "sidecars add to the app and to later init containers",
			spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					{RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}},
					{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2")}},
				},
				Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}},
			},
			want: rl("cpu", "2500m"),
		},
		{
			name: "overhead",
			spec: corev1.PodSpec{
				Overhead:   rl("cpu", "100m", "memory", "64Mi"),
				Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "900m", "memory", "960Mi")}}},
			},
			want: rl("cpu", "1", "memory", "1Gi"),
		},
		{name: "nothing requested", spec: corev1.PodSpec{Containers: []corev1.Container{{}}}, want: corev1.ResourceList{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodRequests(&tt.spec); !sameResources(got, tt.want) {
				t.Errorf("PodRequests() = %s, want %s", FormatResources(got), FormatResources(tt.want))
			}
		})
	}
}

func TestScaleMin(t *testing.T) {
	tests := []struct {
		min, piece, total, want int64
	}{
		{10, 6, 10, 6},
		{10, 4, 10, 4},
		{3, 6, 10, 2}, // 1.8 → 2
		{3, 4, 10, 2}, // 1.2 → 2
		{1, 4, 10, 1}, // 0.4 → 1
		{1, 0, 10, 0},
		{5, 1, 10, 1},  // 0.5 → 1
		{0, 5, 10, 0},  // no minimum stays none
		{9, 1, 10, 1},  // 0.9 → 1
		{10, 3, 10, 3}, // never above the piece
		{7, 7, 7, 7},
	}
	for _, tt := range tests {
		if got := ScaleMin(tt.min, tt.piece, tt.total); got != tt.want {
			t.Errorf("ScaleMin(%d, %d, %d) = %d, want %d", tt.min, tt.piece, tt.total, got, tt.want)
		}
		if got := ScaleMin(tt.min, tt.piece, tt.total); got > tt.piece {
			t.Errorf("ScaleMin(%d, %d, %d) = %d above the piece", tt.min, tt.piece, tt.total, got)
		}
	}
}

func TestBestFit(t *testing.T) {
	gpus := func(n string) corev1.ResourceList { return rl("cpu", "64", "memory", "256Gi", "nvidia.com/gpu", n) }
	tests := []struct {
		name    string
		need    corev1.ResourceList
		cands   []Candidate
		want    string
		wantErr string
		errIs   error
	}{
		{
			name:  "the only cluster with free GPUs",
			need:  rl("cpu", "2", "nvidia.com/gpu", "2"),
			cands: []Candidate{{Cluster: "member1", Free: gpus("0")}, {Cluster: "member2", Free: gpus("4")}},
			want:  "member2",
		},
		{
			name:  "most free of the scarcest resource wins over plenty of cpu",
			need:  rl("cpu", "1", "nvidia.com/gpu", "2"),
			cands: []Candidate{{Cluster: "a", Free: rl("cpu", "100", "nvidia.com/gpu", "2")}, {Cluster: "b", Free: rl("cpu", "2", "nvidia.com/gpu", "6")}},
			want:  "b",
		},
		{
			name:  "ties by name",
			need:  rl("cpu", "1"),
			cands: []Candidate{{Cluster: "c", Free: rl("cpu", "4")}, {Cluster: "b", Free: rl("cpu", "4")}},
			want:  "b",
		},
		{
			name:  "queue room limits a cluster",
			need:  rl("nvidia.com/gpu", "4"),
			cands: []Candidate{{Cluster: "a", Free: gpus("8"), QueueFree: rl("nvidia.com/gpu", "2"), Queue: "q"}, {Cluster: "b", Free: gpus("4")}},
			want:  "b",
		},
		{
			name:  "queue not listing a resource does not limit it",
			need:  rl("nvidia.com/gpu", "4"),
			cands: []Candidate{{Cluster: "a", Free: gpus("8"), QueueFree: rl("cpu", "1"), Queue: "q"}},
			want:  "a",
		},
		{
			name:    "no fit names the closest cluster and the shortfall",
			need:    rl("cpu", "4", "nvidia.com/gpu", "8"),
			cands:   []Candidate{{Cluster: "member1", Free: gpus("2")}, {Cluster: "member2", Free: gpus("4")}},
			wantErr: "needs 8 nvidia.com/gpu, best cluster member2 has 4",
			errIs:   ErrNoFit,
		},
		{
			name:    "no fit because of the queue",
			need:    rl("nvidia.com/gpu", "8"),
			cands:   []Candidate{{Cluster: "member1", Free: gpus("16"), QueueFree: rl("nvidia.com/gpu", "4"), Queue: "research-queue"}},
			wantErr: "needs 8 nvidia.com/gpu, best cluster member1 has 4 free in queue research-queue",
			errIs:   ErrNoFit,
		},
		{
			name:    "memory units: 3Gi does not fit 3G",
			need:    rl("memory", "3Gi"),
			cands:   []Candidate{{Cluster: "a", Free: rl("memory", "3G")}},
			wantErr: "needs 3Gi memory, best cluster a has 3G",
			errIs:   ErrNoFit,
		},
		{
			name:  "millicores add up exactly",
			need:  rl("cpu", "1500m"),
			cands: []Candidate{{Cluster: "a", Free: rl("cpu", "1.5")}},
			want:  "a",
		},
		{
			name:    "unknown capacity is skipped",
			need:    rl("cpu", "1"),
			cands:   []Candidate{{Cluster: "a"}},
			wantErr: ErrNoCapacity.Error(),
			errIs:   ErrNoCapacity,
		},
		{
			name:    "a resource no cluster has",
			need:    rl("amd.com/gpu", "1"),
			cands:   []Candidate{{Cluster: "b", Free: gpus("4")}, {Cluster: "a", Free: gpus("4")}},
			wantErr: "needs 1 amd.com/gpu, best cluster a has 0",
			errIs:   ErrNoFit,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BestFit(tt.need, tt.cands)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, tt.errIs) {
					t.Fatalf("BestFit() = %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("BestFit() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
