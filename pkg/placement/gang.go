package placement

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// GangPod is one pod of a Volcano job's minimum gang.
type GangPod struct {
	// Task is the task's name; Index the pod's index within the task.
	Task  string
	Index int32
	// Spec is the task's pod template spec, shared by the task's pods;
	// callers must not modify it.
	Spec *corev1.PodSpec
	// Requests are the pod's effective requests (PodRequests).
	Requests corev1.ResourceList
}

// MinAvailable is the job's gang size as Volcano's admission webhook would
// default it: spec.minAvailable when set, else the sum over tasks of their
// minAvailable (a task without one counts all its replicas); never more
// than the job's replicas.
func MinAvailable(spec *batchv1alpha1.JobSpec) int32 {
	var total, mins int64
	for _, t := range spec.Tasks {
		r := int64(max(t.Replicas, 0))
		total += r
		if t.MinAvailable != nil {
			mins += min(int64(max(*t.MinAvailable, 0)), r)
		} else {
			mins += r
		}
	}
	m := int64(spec.MinAvailable)
	if m <= 0 {
		m = mins
	}
	return int32(min(m, total))
}

// Gang returns the pods that must be placed together before the job
// starts: MinAvailable pods. Each task first contributes its own
// minAvailable pods (tasks in spec order, stopping at the gang size), then
// the rest of the gang is filled from the tasks' remaining replicas, again
// in spec order. Volcano orders tasks by priority class when it sums a
// PodGroup's minResources; this ignores priority classes, which changes
// only which pods fill the gang when tasks differ in requests and priority.
func Gang(spec *batchv1alpha1.JobSpec) []GangPod {
	need := MinAvailable(spec)
	taken := make([]int32, len(spec.Tasks))
	out := make([]GangPod, 0, need)
	take := func(i int, n int32) {
		t := &spec.Tasks[i]
		req := PodRequests(&t.Template.Spec)
		for ; n > 0 && int32(len(out)) < need; n-- {
			out = append(out, GangPod{Task: t.Name, Index: taken[i], Spec: &t.Template.Spec, Requests: req})
			taken[i]++
		}
	}
	for i, t := range spec.Tasks {
		if t.MinAvailable != nil && t.Replicas > 0 {
			take(i, min(max(*t.MinAvailable, 0), t.Replicas))
		}
	}
	for i, t := range spec.Tasks {
		if rest := t.Replicas - taken[i]; rest > 0 {
			take(i, rest)
		}
	}
	return out
}

// PodRequests is what the scheduler reserves for a pod of this spec: the
// sum of its containers' requests (a container's limit stands in for a
// request it does not set, as the API server defaults it), restartable
// init containers (sidecars) included, or the largest single init
// container's if that is more, per resource, plus the pod overhead.
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for i := range spec.Containers {
		AddResources(sum, containerRequests(&spec.Containers[i]))
	}
	initMax := corev1.ResourceList{}
	sidecars := corev1.ResourceList{}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		req := containerRequests(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			// A sidecar runs beside every later init container and the app.
			AddResources(sidecars, req)
			continue
		}
		// A regular init container runs with the sidecars started before it.
		withSidecars := sidecars.DeepCopy()
		AddResources(withSidecars, req)
		maxResources(initMax, withSidecars)
	}
	AddResources(sum, sidecars)
	maxResources(sum, initMax)
	AddResources(sum, spec.Overhead)
	return sum
}

func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range c.Resources.Limits {
		out[name] = q.DeepCopy()
	}
	for name, q := range c.Resources.Requests {
		out[name] = q.DeepCopy()
	}
	return out
}

// AddResources adds b to a, per resource.
func AddResources(a, b corev1.ResourceList) {
	for name, q := range b {
		cur, ok := a[name]
		if !ok {
			a[name] = q.DeepCopy()
			continue
		}
		cur.Add(q)
		a[name] = cur
	}
}

func maxResources(a, b corev1.ResourceList) {
	for name, q := range b {
		if cur, ok := a[name]; !ok || q.Cmp(cur) > 0 {
			a[name] = q.DeepCopy()
		}
	}
}

// GangRequests is the sum of the gang's requests.
func GangRequests(gang []GangPod) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, p := range gang {
		AddResources(sum, p.Requests)
	}
	return sum
}

// quantity returns l[name], zero when absent.
func quantity(l corev1.ResourceList, name corev1.ResourceName) resource.Quantity {
	if q, ok := l[name]; ok {
		return q
	}
	return resource.Quantity{}
}

// ScaleMin is a piece's share of a gang size: minimum of total replicas
// scaled to the piece's replicas, rounded up — a piece never holds a
// smaller fraction of its replicas as its gang than the whole job did —
// and never more than the piece's replicas. The job-level caller raises it
// to 1 for a non-empty piece whose scaled size is 0.
func ScaleMin(minimum, piece, total int64) int64 {
	if piece <= 0 || total <= 0 || minimum <= 0 {
		return 0
	}
	// minimum, piece ≤ total < 2^31 (replicas are int32): no overflow.
	scaled := (minimum*piece + total - 1) / total
	return min(scaled, piece)
}
