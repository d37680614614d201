package volcano

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/placement"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// listPage bounds each List response.
const listPage = 500

// snapshot is the cluster as the preflight and the capacity report see it.
type snapshot struct {
	// nodesKnown and podsKnown are false when the agent may not list them
	// (a namespaced tenant's RBAC): then there is no capacity, resp. no
	// free capacity, and no preflight.
	nodesKnown, podsKnown, queuesKnown bool
	nodes                              []corev1.Node
	// requested: per node name, what its non-terminal pods request
	// ("pods" counts them).
	requested map[string]corev1.ResourceList
	// volcano is false when Volcano is not installed; then queues and
	// podGroups are empty.
	volcano        bool
	queues         map[string]*schedulingv1beta1.Queue
	queueAllocated map[string]corev1.ResourceList
	podGroups      []schedulingv1beta1.PodGroup
}

// snapshot lists nodes, non-terminal pods and, with Volcano, queues and
// PodGroups.
func (m *Manager) snapshot(ctx context.Context) (*snapshot, error) {
	s := &snapshot{requested: map[string]corev1.ResourceList{}, queues: map[string]*schedulingv1beta1.Queue{}, queueAllocated: map[string]corev1.ResourceList{}}
	var nodes corev1.NodeList
	switch err := m.list(ctx, &nodes); {
	case err == nil:
		s.nodes, s.nodesKnown = nodes.Items, true
	case !apierrors.IsForbidden(err):
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var pods corev1.PodList
	nonTerminal := fields.AndSelectors(
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)),
	)
	switch err := m.list(ctx, &pods, client.MatchingFieldsSelector{Selector: nonTerminal}); {
	case err == nil:
		s.podsKnown = true
	case !apierrors.IsForbidden(err):
		return nil, fmt.Errorf("list pods: %w", err)
	}
	switch err := m.Installed(ctx); {
	case err == nil:
		s.volcano = true
	case !errors.Is(err, ErrNotInstalled):
		return nil, err
	}
	groupQueue := map[string]string{} // namespace/podgroup → queue
	if s.volcano {
		var queues schedulingv1beta1.QueueList
		switch err := m.list(ctx, &queues); {
		case err == nil:
			s.queuesKnown = true
		case !apierrors.IsForbidden(err):
			return nil, fmt.Errorf("list queues: %w", err)
		}
		for i := range queues.Items {
			q := &queues.Items[i]
			s.queues[q.Name] = q
		}
		var pgs schedulingv1beta1.PodGroupList
		if err := m.list(ctx, &pgs); err != nil && !apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("list podgroups: %w", err)
		}
		s.podGroups = pgs.Items
		for _, pg := range pgs.Items {
			groupQueue[pg.Namespace+"/"+pg.Name] = pg.Spec.Queue
		}
	}
	one := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" {
			continue
		}
		req := placement.PodRequests(&p.Spec)
		r := s.requested[p.Spec.NodeName]
		if r == nil {
			r = corev1.ResourceList{}
			s.requested[p.Spec.NodeName] = r
		}
		placement.AddResources(r, req)
		placement.AddResources(r, one)
		if q, ok := groupQueue[p.Namespace+"/"+p.Annotations[schedulingv1beta1.KubeGroupNameAnnotationKey]]; ok && q != "" {
			a := s.queueAllocated[q]
			if a == nil {
				a = corev1.ResourceList{}
				s.queueAllocated[q] = a
			}
			placement.AddResources(a, req)
		}
	}
	return s, nil
}

func (m *Manager) list(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	var all []runtime.Object
	cont := ""
	for {
		page := l.DeepCopyObject().(client.ObjectList)
		rctx, cancel := m.reqCtx(ctx)
		err := m.client.List(rctx, page, append(opts, client.Limit(listPage), client.Continue(cont))...)
		cancel()
		if err != nil {
			return err
		}
		items, err := meta.ExtractList(page)
		if err != nil {
			return err
		}
		all = append(all, items...)
		if cont = page.GetContinue(); cont == "" {
			return meta.SetList(l, all)
		}
	}
}

// nodeInfos are the schedulable nodes for the preflight.
func (s *snapshot) nodeInfos() []NodeInfo {
	var out []NodeInfo
	for i := range s.nodes {
		n := &s.nodes[i]
		if !SchedulableNode(n) {
			continue
		}
		out = append(out, NodeInfo{Name: n.Name, Labels: n.Labels, Taints: n.Spec.Taints, Allocatable: n.Status.Allocatable, Requested: s.requested[n.Name]})
	}
	return out
}

// capacity summarises the schedulable nodes and the queues; nil when the
// nodes cannot be read.
func (s *snapshot) capacity() *status.Capacity {
	if !s.nodesKnown {
		return nil
	}
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.Quantity{},
		corev1.ResourceMemory: resource.Quantity{},
		GPUResource:           resource.Quantity{},
	}
	used := corev1.ResourceList{}
	c := &status.Capacity{}
	for i := range s.nodes {
		n := &s.nodes[i]
		if !SchedulableNode(n) {
			continue
		}
		c.ReadyNodes++
		for name, q := range n.Status.Allocatable {
			if reported(name) {
				placement.AddResources(alloc, corev1.ResourceList{name: q})
			}
		}
		for name, q := range s.requested[n.Name] {
			if reported(name) {
				placement.AddResources(used, corev1.ResourceList{name: q})
			}
		}
	}
	free := alloc.DeepCopy()
	for name, q := range used {
		f := free[name]
		f.Sub(q)
		if f.Sign() < 0 {
			f = resource.Quantity{}
		}
		free[name] = f
	}
	c.Allocatable = quantities(alloc)
	if s.podsKnown {
		c.Free = quantities(free)
	}
	names := make([]string, 0, len(s.queues))
	for name := range s.queues {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		q := s.queues[name]
		c.Queues = append(c.Queues, status.QueueCapacity{
			Name:       name,
			State:      string(q.Status.State),
			Capability: quantities(q.Spec.Capability),
			Allocated:  quantities(s.queueAllocated[name]),
		})
	}
	return c
}

// reported: cpu, memory and extended resources (vendor-domain names such
// as nvidia.com/gpu) go into the capacity snapshot.
func reported(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory ||
		strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func quantities(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

// Report is what the loop puts into the cluster's status document.
type Report struct {
	Jobs     []status.JobStatus
	Capacity *status.Capacity
}

// Report lists the cluster's Flotilla-managed Volcano jobs, plus the job
// units of the slice (jobUnits) whose job was not submitted, and takes the
// capacity snapshot. Without Volcano, Jobs is empty and the capacity has no
// queues.
func (m *Manager) Report(ctx context.Context, jobUnits []string) (*Report, error) {
	r, err := m.report(ctx, jobUnits)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		// The last good report, rather than a document whose jobs vanish
		// for one cycle.
		return m.lastReport, err
	}
	m.lastReport = r
	return r, nil
}

func (m *Manager) report(ctx context.Context, jobUnits []string) (*Report, error) {
	snap, err := m.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	r := &Report{Capacity: snap.capacity()}
	inSlice := map[string]bool{}
	for _, u := range jobUnits {
		inSlice[u] = true
	}
	m.mu.Lock()
	for u := range m.lastResults {
		if !inSlice[u] {
			delete(m.lastResults, u)
		}
	}
	last := make(map[string]JobResult, len(m.lastResults))
	for u, res := range m.lastResults {
		last[u] = *res
	}
	m.mu.Unlock()
	if !snap.volcano {
		return r, nil
	}
	var jobs batchv1alpha1.JobList
	if err := m.list(ctx, &jobs, client.MatchingLabels{apply.LabelManagedBy: apply.ManagedByValue}); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	live := map[string]bool{}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		unit := j.Labels[apply.LabelUnit]
		live[unit] = true
		js := jobStatus(j, podGroupOf(snap.podGroups, j))
		if res, ok := last[unit]; ok && res.Job.Name == j.Name && res.Job.Namespace == j.Namespace && !res.Ready && res.Message != "" {
			js.Message = res.Message
		}
		r.Jobs = append(r.Jobs, js)
	}
	for _, unit := range jobUnits {
		res, ok := last[unit]
		if !ok || live[unit] || res.Action != ActionNotSubmitted {
			continue
		}
		r.Jobs = append(r.Jobs, status.JobStatus{
			Name: res.Job.Name, Namespace: res.Job.Namespace, Unit: unit, SpecHash: res.SpecHash,
			Phase: PhaseNotSubmitted, Preflight: string(Unschedulable), Message: res.Message,
		})
	}
	sort.Slice(r.Jobs, func(i, j int) bool {
		a, b := r.Jobs[i], r.Jobs[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return r, nil
}

func podGroupOf(pgs []schedulingv1beta1.PodGroup, j *batchv1alpha1.Job) *schedulingv1beta1.PodGroup {
	for i := range pgs {
		for _, ref := range pgs[i].OwnerReferences {
			if ref.UID == j.UID {
				return &pgs[i]
			}
		}
	}
	return nil
}

// jobStatus is a live job's status line.
func jobStatus(j *batchv1alpha1.Job, pg *schedulingv1beta1.PodGroup) status.JobStatus {
	phase := string(j.Status.State.Phase)
	if phase == "" {
		phase = string(batchv1alpha1.Pending)
	}
	js := status.JobStatus{
		Name: j.Name, Namespace: j.Namespace, Unit: j.Labels[apply.LabelUnit],
		SpecHash:  j.Annotations[AnnotationSpecHash],
		Phase:     phase,
		Running:   j.Status.Running,
		Succeeded: j.Status.Succeeded,
		Failed:    j.Status.Failed,
		Preflight: j.Annotations[AnnotationPreflight],
		Message:   j.Status.State.Message,
	}
	if pg != nil {
		js.PodGroupPhase = string(pg.Status.Phase)
	}
	for _, c := range j.Status.Conditions {
		if c.Status == batchv1alpha1.Running && c.LastTransitionTime != nil {
			t := c.LastTransitionTime.Rfc3339Copy()
			js.StartTime = &t
			break
		}
	}
	js.CompletionTime = finishedAt(j)
	return js
}

// finishedAt is when the job entered its final phase; nil while active.
func finishedAt(j *batchv1alpha1.Job) *metav1.Time {
	if !finished(j.Status.State.Phase) {
		return nil
	}
	t := j.Status.State.LastTransitionTime
	if t.IsZero() {
		for _, c := range j.Status.Conditions {
			if c.Status == j.Status.State.Phase && c.LastTransitionTime != nil {
				t = *c.LastTransitionTime
			}
		}
	}
	if t.IsZero() {
		return nil
	}
	t = t.Rfc3339Copy()
	return &t
}
