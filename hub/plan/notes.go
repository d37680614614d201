package plan

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

// maxNoteClusters is how many clusters one note names before "and N more".
const maxNoteClusters = 8

const volcanoGroup = "batch.volcano.sh"

// noteCollector gathers, across clusters, what the per-object diffs do not
// say at a glance: how a workload's replicas are divided between clusters
// and where Volcano jobs run.
type noteCollector struct {
	mu       sync.Mutex
	replicas map[string]*replicaNote // by workload key
	jobs     map[string]*jobNote     // by job namespace/name
}

type replicaNote struct {
	label   string
	changes map[string][2]int64 // cluster → before, after (0 when absent)
	// scaled: some cluster had the workload on both sides with another
	// count. Without it the note would only repeat an addition or removal.
	// A note also needs two clusters in changes: it tells of a move.
	scaled bool
}

type jobNote struct {
	name                    string
	added, removed, changed []string
}

// workloadKinds default spec.replicas to 1 when it is absent.
var workloadKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "ReplicaSet": true}

// replicasOf returns an object's replica count: spec.replicas, defaulted
// for workloads, or the sum of a Volcano job's task replicas.
func replicasOf(o *unstructured.Unstructured) (int64, bool) {
	if o == nil {
		return 0, false
	}
	gvk := o.GroupVersionKind()
	if gvk.Group == volcanoGroup && gvk.Kind == "Job" {
		tasks, _, _ := unstructured.NestedSlice(o.Object, "spec", "tasks")
		var n int64
		for _, t := range tasks {
			if m, ok := t.(map[string]any); ok {
				r, _ := number(m["replicas"])
				n += r
			}
		}
		return n, len(tasks) > 0
	}
	if v, found, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas"); found {
		if r, ok := number(v); ok {
			return r, true
		}
	}
	if workloadKinds[gvk.Kind] {
		return 1, true
	}
	return 0, false
}

// number reads an integer decoded either way (int64 from apimachinery's
// JSON decoder, float64 from encoding/json).
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}

func isVolcanoJob(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	return gvk.Group == volcanoGroup && gvk.Kind == "Job"
}

// observe records one rendered unit of one cluster (either side may be
// nil: the unit was added or removed).
func (n *noteCollector) observe(cluster, unit string, base, head []*unstructured.Unstructured) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.replicas == nil {
		n.replicas, n.jobs = map[string]*replicaNote{}, map[string]*jobNote{}
	}
	byKey := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := make(map[string]*unstructured.Unstructured, len(objs))
		for _, o := range objs {
			m[objectKey(o)] = o
		}
		return m
	}
	b, h := byKey(base), byKey(head)
	keys := map[string]bool{}
	for k := range b {
		keys[k] = true
	}
	for k := range h {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		bo, ho := b[k], h[k]
		o := ho
		if o == nil {
			o = bo
		}
		if isVolcanoJob(o) {
			id := o.GetNamespace() + "/" + o.GetName()
			j := n.jobs[id]
			if j == nil {
				j = &jobNote{name: o.GetName()}
				n.jobs[id] = j
			}
			switch {
			case bo == nil:
				j.added = append(j.added, cluster)
			case ho == nil:
				j.removed = append(j.removed, cluster)
			case !equalObjects(bo, ho):
				j.changed = append(j.changed, cluster)
			}
		}
		br, bok := replicasOf(bo)
		hr, hok := replicasOf(ho)
		if (!bok && !hok) || br == hr {
			continue
		}
		rk := unit + "\x00" + k
		r := n.replicas[rk]
		if r == nil {
			r = &replicaNote{label: replicaLabel(unit, o), changes: map[string][2]int64{}}
			n.replicas[rk] = r
		}
		r.changes[cluster] = [2]int64{br, hr}
		r.scaled = r.scaled || (bo != nil && ho != nil)
	}
}

func equalObjects(a, b *unstructured.Unstructured) bool {
	return toYAML(a.Object) == toYAML(b.Object)
}

// replicaLabel names a workload in a note: its name for a Deployment,
// "job <name>" for a Volcano job, else "<Kind> <name>".
func replicaLabel(unit string, o *unstructured.Unstructured) string {
	switch {
	case isVolcanoJob(o):
		return "job " + o.GetName()
	case o.GetKind() == "Deployment":
		return o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}

// notes returns the sentences, replica divisions first, each group sorted.
func (n *noteCollector) notes() []string {
	var reps []string
	for _, r := range n.replicas {
		// One cluster's count changing is a scale, shown by its diff; a
		// move takes at least two clusters.
		if !r.scaled || len(r.changes) < 2 {
			continue
		}
		clusters := sortedKeys(r.changes)
		parts := make([]string, 0, min(len(clusters), maxNoteClusters)+1)
		for i, c := range clusters {
			if i == maxNoteClusters {
				parts = append(parts, "and "+plural.Count(len(clusters)-i, "more cluster", "more clusters"))
				break
			}
			ch := r.changes[c]
			s := fmt.Sprintf("%s %d→%d", c, ch[0], ch[1])
			if i == 0 {
				s += " replicas"
			}
			parts = append(parts, s)
		}
		reps = append(reps, r.label+": "+strings.Join(parts, ", "))
	}
	sort.Strings(reps)
	var jobs []string
	for _, j := range n.jobs {
		var parts []string
		switch {
		case len(j.added) > 0 && len(j.removed) > 0:
			parts = append(parts, fmt.Sprintf("placed on %s (was %s)", clusterList(j.added), clusterList(j.removed)))
		case len(j.added) > 0:
			parts = append(parts, "placed on "+clusterList(j.added))
		case len(j.removed) > 0:
			parts = append(parts, "removed from "+clusterList(j.removed))
		}
		if len(j.changed) > 0 {
			parts = append(parts, "changed on "+clusterList(j.changed))
		}
		if len(parts) > 0 {
			jobs = append(jobs, "job "+j.name+": "+strings.Join(parts, "; "))
		}
	}
	sort.Strings(jobs)
	return append(reps, jobs...)
}

func clusterList(cs []string) string {
	sort.Strings(cs)
	if len(cs) > maxNoteClusters {
		return strings.Join(cs[:maxNoteClusters], ", ") + fmt.Sprintf(" and %d more", len(cs)-maxNoteClusters)
	}
	return strings.Join(cs, ", ")
}
