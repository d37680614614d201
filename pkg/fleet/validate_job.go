package fleet

import (
	"fmt"
	"strings"
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
