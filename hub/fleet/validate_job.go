package fleet

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// jobDefaultQueue is the queue Volcano creates on every cluster.
const jobDefaultQueue = "default"

// globalJobReferences checks what a GlobalJob refers to beyond its own
// fields: the tasks its tasks depend on, and its queue on each destination
// cluster (a queue no fleet of a cluster declares is a warning: the job
// cannot be submitted there unless the queue is created some other way).
func (v *validator) globalJobReferences(j *GlobalJob) {
	d := v.docs[j]
	t := j.Spec.Template
	names := map[string]bool{}
	for _, task := range t.Tasks {
		names[task.Name] = true
	}
	for i, task := range t.Tasks {
		if task.DependsOn == nil {
			continue
		}
		for k, n := range task.DependsOn.Name {
			if !names[n] || n == "" {
				d.errorf(fmt.Sprintf("spec.template.tasks[%d].dependsOn.name[%d]", i, k), ErrDanglingReference, "no task named %q in this job", n)
			}
		}
	}
	queue := t.Queue
	if queue == "" || queue == jobDefaultQueue {
		return
	}
	var missing []string
	for _, c := range v.r.Resolve(j.Spec.Placement.Destination) {
		if !v.declaresQueue(c, queue) {
			missing = append(missing, c.Metadata.Name)
		}
	}
	if len(missing) > 0 {
		v.warnf(d, "spec.template.queue", ErrNoMatch, "queue %s is not declared by any fleet of %s", queue, clusterList(missing))
	}
}

func (v *validator) declaresQueue(c *Cluster, queue string) bool {
	for _, f := range v.r.FleetsOf(c) {
		for _, q := range f.Spec.Queues {
			if q.Name == queue {
				return true
			}
		}
	}
	return false
}

func clusterList(names []string) string {
	const shown = 5
	word := "cluster "
	if len(names) > 1 {
		word = "clusters "
	}
	if len(names) <= shown {
		return word + strings.Join(names, ", ")
	}
	return word + strings.Join(names[:shown], ", ") + fmt.Sprintf(" and %d more", len(names)-shown)
}

func (v *validator) globalJob(j *GlobalJob) {
	d := v.docs[j]
	v.meta(d, j.Metadata)
	if a := v.r.Application(jobUnitPrefix + j.Metadata.Name); a != nil {
		d.errorf("metadata.name", ErrDuplicate, "its unit %s%s would collide with application %s (%s)", jobUnitPrefix, j.Metadata.Name, a.Metadata.Name, a.Source.File)
	}
	if ns := j.Spec.Namespace; ns != "" {
		dnsLabel(d, "spec.namespace", ns)
	}
	p := j.Spec.Placement
	clusters, ok := v.destination(d, "spec.placement.destination", p.Destination)
	switch p.Type {
	case "":
		d.errorf("spec.placement.type", ErrRequired, "%s or %s", GlobalJobPlacementDivided, GlobalJobPlacementBestFit)
	case GlobalJobPlacementDivided:
		v.weights(d, "spec.placement.staticWeightList", p.StaticWeightList, clusters, ok)
	case GlobalJobPlacementBestFit:
		if len(p.StaticWeightList) > 0 {
			d.errorf("spec.placement.staticWeightList", ErrInvalidValue, "weights apply to %s placement only", GlobalJobPlacementDivided)
		}
	default:
		d.errorf("spec.placement.type", ErrInvalidValue, "%q is not %s or %s", p.Type, GlobalJobPlacementDivided, GlobalJobPlacementBestFit)
	}
	t := j.Spec.Template
	if len(t.Tasks) == 0 {
		d.errorf("spec.template.tasks", ErrRequired, "a job needs at least one task")
	}
	if q := t.Queue; q != "" {
		if errs := validation.IsDNS1123Subdomain(q); len(errs) > 0 {
			d.errorf("spec.template.queue", ErrInvalidValue, "%q is not a valid queue name: %s", q, strings.Join(errs, "; "))
		}
	}
	total := int64(0)
	names := map[string]int{}
	for i, task := range t.Tasks {
		f := indexPath("spec.template.tasks", i)
		if task.Name != "" {
			dnsLabel(d, f+".name", task.Name)
			if k, dup := names[task.Name]; dup {
				d.errorf(f+".name", ErrDuplicate, "task %q is already declared at spec.template.tasks[%d]", task.Name, k)
			}
			names[task.Name] = i
		}
		if task.Replicas <= 0 {
			d.errorf(f+".replicas", ErrInvalidValue, "%d must be positive", task.Replicas)
		}
		total += int64(task.Replicas)
		if m := task.MinAvailable; m != nil && (*m < 0 || *m > task.Replicas) {
			d.errorf(f+".minAvailable", ErrInvalidValue, "%d must be between 0 and the task's %d replicas", *m, task.Replicas)
		}
	}
	if m := t.MinAvailable; m < 0 || int64(m) > total {
		d.errorf("spec.template.minAvailable", ErrInvalidValue, "%d must be between 0 and the job's %d replicas", m, total)
	}
}
