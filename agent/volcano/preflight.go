package volcano

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/flotilla-gitops/flotilla/pkg/placement"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

// Verdict is the gang preflight's answer for a job.
type Verdict string

// Verdicts.
const (
	// Fits: the gang fits the free capacity now.
	Fits Verdict = "Fits"
	// Waiting: the gang fits the cluster and its queue when empty, but not
	// what is free now; it is submitted and Volcano starts it when running
	// pods make room.
	Waiting Verdict = "Waiting"
	// Unschedulable: the gang can never fit (nodes or queue capability); it
	// is not submitted, so no pod is created, and is checked again every
	// cycle (capacity may be added).
	Unschedulable Verdict = "Unschedulable"
)

// NodeInfo is a schedulable node as the preflight sees it.
type NodeInfo struct {
	Name        string
	Labels      map[string]string
	Taints      []corev1.Taint
	Allocatable corev1.ResourceList
	// Requested is the sum of the requests of the non-terminal pods bound
	// to the node, with "pods" counting them.
	Requested corev1.ResourceList
}

// QueueInfo is the job's Volcano queue.
type QueueInfo struct {
	Name string
	// Capability limits the queue; a resource it does not list is not
	// limited. Nil: no limit.
	Capability corev1.ResourceList
	// Allocated is what the queue's running pods request.
	Allocated corev1.ResourceList
}

// PreflightResult is the verdict and, unless Fits, why.
type PreflightResult struct {
	Verdict Verdict
	Message string
}

// Preflight compares a job's minimum gang with the schedulable nodes and
// the job's queue:
//
//   - Unschedulable when the gang could not run even on an idle cluster:
//     its total requests exceed the nodes that can take its pods (node
//     selector, required node affinity and NoSchedule/NoExecute taints
//     honoured), or the queue's capability; or one of its pods fits on no
//     node by itself; or no packing of all its pods onto the nodes'
//     allocatable is found. Packing is first-fit decreasing (pods by GPU,
//     then CPU, then memory requests, largest first; nodes by name), which
//     can miss a packing only in rare fragmented cases — then the message
//     says that no packing was found.
//   - Waiting when it would fit an idle cluster but not the free capacity
//     now (allocatable minus the requests of pods bound to each node), or
//     the queue's free capability (capability minus allocated).
//   - Fits otherwise.
//
// nodes must be the schedulable ones (SchedulableNode); queue nil means no
// queue limit. Quantities are compared exactly (resource.Quantity).
func Preflight(gang []placement.GangPod, nodes []NodeInfo, queue *QueueInfo) PreflightResult {
	if len(gang) == 0 {
		return PreflightResult{Verdict: Fits}
	}
	nodes = append([]NodeInfo(nil), nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	pods := sortedPods(gang)
	eligible := make([][]bool, len(pods))
	for i, p := range pods {
		eligible[i] = make([]bool, len(nodes))
		for j := range nodes {
			eligible[i][j] = podMayRunOn(p.Spec, &nodes[j])
		}
	}
	total := placement.GangRequests(gang)

	// Never fits: aggregates, queue capability, single pods, packing.
	if msg := aggregateShortfall(total, len(gang), nodes, eligible, func(n *NodeInfo) corev1.ResourceList { return n.Allocatable }, "schedulable nodes have"); msg != "" {
		return PreflightResult{Unschedulable, msg}
	}
	if queue != nil {
		if msg := queueShortfall(total, queue.Capability, nil); msg != "" {
			return PreflightResult{Unschedulable, fmt.Sprintf("gang of %s %s; queue %s capability is %s", plural.Count(len(gang), "pod", "pods"), msg, queue.Name, shortfallHave(total, queue.Capability, nil))}
		}
	}
	for i, p := range pods {
		fitsAlone := false
		for j := range nodes {
			if eligible[i][j] && fitsOn(p.Requests, nodes[j].Allocatable, nil) {
				fitsAlone = true
				break
			}
		}
		if !fitsAlone {
			return PreflightResult{Unschedulable, fmt.Sprintf("a pod of task %s (%s) fits on no schedulable node", taskName(p), placement.FormatResources(p.Requests))}
		}
	}
	if !pack(pods, nodes, eligible, false) {
		return PreflightResult{Unschedulable, fmt.Sprintf("no packing of the gang's %d pods onto the schedulable nodes was found (first-fit decreasing)", len(gang))}
	}

	// Fits an idle cluster; does it fit now?
	if queue != nil && queue.Capability != nil {
		if msg := queueShortfall(total, queue.Capability, queue.Allocated); msg != "" {
			return PreflightResult{Waiting, fmt.Sprintf("waits for queue %s: gang %s, the queue has %s free", queue.Name, msg, shortfallHave(total, queue.Capability, queue.Allocated))}
		}
	}
	if msg := aggregateShortfall(total, len(gang), nodes, eligible, freeOf, "free now is"); msg != "" {
		return PreflightResult{Waiting, "waits for capacity: " + msg}
	}
	if !pack(pods, nodes, eligible, true) {
		return PreflightResult{Waiting, fmt.Sprintf("waits for capacity: the gang's %d pods do not fit the free room of the nodes now", len(gang))}
	}
	return PreflightResult{Verdict: Fits}
}

func taskName(p placement.GangPod) string {
	if p.Task == "" {
		return "#" + strconv.Itoa(int(p.Index))
	}
	return p.Task
}

// sortedPods orders the gang for first-fit decreasing: GPUs, then CPU,
// then memory, largest first; ties keep the gang's order.
func sortedPods(gang []placement.GangPod) []placement.GangPod {
	pods := append([]placement.GangPod(nil), gang...)
	keys := []corev1.ResourceName{GPUResource, corev1.ResourceCPU, corev1.ResourceMemory}
	sort.SliceStable(pods, func(i, j int) bool {
		for _, k := range keys {
			a, b := pods[i].Requests[k], pods[j].Requests[k]
			if c := a.Cmp(b); c != 0 {
				return c > 0
			}
		}
		return false
	})
	return pods
}

func freeOf(n *NodeInfo) corev1.ResourceList {
	free := n.Allocatable.DeepCopy()
	for name, q := range n.Requested {
		if f, ok := free[name]; ok {
			f.Sub(q)
			free[name] = f
		}
	}
	return free
}

// aggregateShortfall compares the gang's total with the sum, over the
// nodes that can take at least one of its pods, of what capacity gives;
// "" when every resource suffices.
func aggregateShortfall(total corev1.ResourceList, pods int, nodes []NodeInfo, eligible [][]bool, capacity func(*NodeInfo) corev1.ResourceList, have string) string {
	sum := corev1.ResourceList{}
	any := false
	for j := range nodes {
		usable := false
		for i := range eligible {
			usable = usable || eligible[i][j]
		}
		if usable {
			any = true
			placement.AddResources(sum, capacity(&nodes[j]))
		}
	}
	if !any {
		return fmt.Sprintf("no schedulable node can take the gang's pods (node selector, affinity or taints); the gang needs %s", placement.FormatResources(total))
	}
	var short []string
	for _, name := range sortedNames(total) {
		need := total[name]
		if need.Sign() <= 0 {
			continue
		}
		got := sum[name]
		if need.Cmp(got) > 0 {
			short = append(short, fmt.Sprintf("needs %s %s, %s %s", need.String(), name, have, got.String()))
		}
	}
	if _, limited := sum[corev1.ResourcePods]; limited {
		if got := sum[corev1.ResourcePods]; got.CmpInt64(int64(pods)) < 0 {
			short = append(short, fmt.Sprintf("needs %s, %s room for %s", plural.Count(pods, "pod", "pods"), have, got.String()))
		}
	}
	if len(short) == 0 {
		return ""
	}
	return fmt.Sprintf("gang of %s %s", plural.Count(pods, "pod", "pods"), strings.Join(short, "; "))
}

// queueShortfall describes the resources of total that exceed
// capability − allocated; "" when none does.
func queueShortfall(total, capability, allocated corev1.ResourceList) string {
	var short []string
	for _, name := range sortedNames(total) {
		need := total[name]
		room, limited := queueRoom(capability, allocated, name)
		if limited && need.Sign() > 0 && need.Cmp(room) > 0 {
			short = append(short, fmt.Sprintf("needs %s %s", need.String(), name))
		}
	}
	return strings.Join(short, ", ")
}

// shortfallHave lists what the queue gives of the resources it is short of.
func shortfallHave(total, capability, allocated corev1.ResourceList) string {
	var have []string
	for _, name := range sortedNames(total) {
		need := total[name]
		room, limited := queueRoom(capability, allocated, name)
		if limited && need.Sign() > 0 && need.Cmp(room) > 0 {
			have = append(have, fmt.Sprintf("%s %s", room.String(), name))
		}
	}
	return strings.Join(have, ", ")
}

func queueRoom(capability, allocated corev1.ResourceList, name corev1.ResourceName) (resource.Quantity, bool) {
	c, ok := capability[name]
	if !ok {
		return resource.Quantity{}, false
	}
	room := c.DeepCopy()
	if a, ok := allocated[name]; ok {
		room.Sub(a)
	}
	return room, true
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// fitsOn reports whether requests (plus one pod) fit into allocatable minus
// used. A resource the node does not list has none.
func fitsOn(requests, allocatable, used corev1.ResourceList) bool {
	for name, need := range requests {
		if need.Sign() <= 0 {
			continue
		}
		room := allocatable[name].DeepCopy()
		if u, ok := used[name]; ok {
			room.Sub(u)
		}
		if need.Cmp(room) > 0 {
			return false
		}
	}
	if podsCap, ok := allocatable[corev1.ResourcePods]; ok {
		room := podsCap.DeepCopy()
		if u, ok := used[corev1.ResourcePods]; ok {
			room.Sub(u)
		}
		if room.CmpInt64(1) < 0 {
			return false
		}
	}
	return true
}

// pack places the (sorted) pods first-fit onto the nodes, from empty nodes
// or, when fromRequested, from what is already requested on them.
func pack(pods []placement.GangPod, nodes []NodeInfo, eligible [][]bool, fromRequested bool) bool {
	used := make([]corev1.ResourceList, len(nodes))
	for j := range nodes {
		used[j] = corev1.ResourceList{}
		if fromRequested {
			placement.AddResources(used[j], nodes[j].Requested)
		}
	}
	one := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	for i, p := range pods {
		placed := false
		for j := range nodes {
			if eligible[i][j] && fitsOn(p.Requests, nodes[j].Allocatable, used[j]) {
				placement.AddResources(used[j], p.Requests)
				placement.AddResources(used[j], one)
				placed = true
				break
			}
		}
		if !placed {
			return false
		}
	}
	return true
}

// podMayRunOn: the node matches the pod's nodeSelector and required node
// affinity, and the pod tolerates the node's NoSchedule and NoExecute
// taints.
func podMayRunOn(spec *corev1.PodSpec, n *NodeInfo) bool {
	if len(spec.NodeSelector) > 0 && !labels.SelectorFromSet(spec.NodeSelector).Matches(labels.Set(n.Labels)) {
		return false
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if !matchesNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, n) {
			return false
		}
	}
	for i := range n.Taints {
		t := &n.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(spec.Tolerations, t) {
			return false
		}
	}
	return true
}

func tolerated(tols []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(logr.Discard(), t, true) {
			return true
		}
	}
	return false
}

// matchesNodeSelector: any term matches (terms are ORed); within a term
// every label expression must hold. Field expressions (matchFields) support
// metadata.name only, as the scheduler does. A term with no expressions
// matches nothing.
func matchesNodeSelector(ns *corev1.NodeSelector, n *NodeInfo) bool {
	for _, term := range ns.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		if termMatches(term, n) {
			return true
		}
	}
	return false
}

func termMatches(term corev1.NodeSelectorTerm, n *NodeInfo) bool {
	for _, e := range term.MatchExpressions {
		if !requirementMatches(e, labels.Set(n.Labels)) {
			return false
		}
	}
	for _, e := range term.MatchFields {
		if e.Key != "metadata.name" || !requirementMatches(corev1.NodeSelectorRequirement{Key: e.Key, Operator: e.Operator, Values: e.Values}, labels.Set{"metadata.name": n.Name}) {
			return false
		}
	}
	return true
}

func requirementMatches(e corev1.NodeSelectorRequirement, set labels.Set) bool {
	var op selection.Operator
	switch e.Operator {
	case corev1.NodeSelectorOpIn:
		op = selection.In
	case corev1.NodeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.NodeSelectorOpExists:
		op = selection.Exists
	case corev1.NodeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	case corev1.NodeSelectorOpGt:
		op = selection.GreaterThan
	case corev1.NodeSelectorOpLt:
		op = selection.LessThan
	default:
		return false
	}
	r, err := labels.NewRequirement(e.Key, op, e.Values)
	if err != nil {
		return false
	}
	return r.Matches(set)
}

// SchedulableNode reports whether new pods can be placed on the node: it is
// Ready and not cordoned.
func SchedulableNode(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
