package fleetrender

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/placement"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// Volcano units: each cluster's fleet queues (UnitVolcanoQueues) and one
// unit per GlobalJob piece placed on it (VolcanoJobPrefix + job name),
// both of kind volcano. The agent creates jobs once and never re-applies
// them (agent/volcano).
//
// Divided: each task's replicas are divided over the destination's
// clusters by the static weights (placement.Divide, as for applications);
// a cluster whose piece has no replica gets no job. Each piece is a gang of
// its own: its minAvailable is the job's (Volcano's default when unset:
// the sum of the tasks' minimums) scaled to the piece and rounded up
// (placement.ScaleMin), at least 1, at least the sum of its tasks'
// minimums and never above the piece's replicas; a task's minAvailable is
// scaled the same way. A piece without some task (a parameter server, a
// driver) could never do the job's work: that is an error suggesting
// BestFit (ErrIncompletePiece).
//
// BestFit: the whole job goes to one cluster: the one it is already
// rendered to (Options.Placed, read from the committed rendered/ by
// Pipeline), so a placed job — running or finished — never moves because
// capacity changed elsewhere; otherwise the
// cluster whose capacity fits the job's gang (placement.Gang, BestFit):
// the cluster's last status document (Options.Capacity), else its
// spec.capacity hints; the job's queue limits it by what the status says
// the queue may still take, else by the queue's declared capability there.
// No fit is an error naming the job and the shortfall. To move a placed
// job, change its destination or rename it.
//
// The rendered Job has what Volcano's admission webhook would default
// (schedulerName volcano, queue default, maxRetry 3, task names
// default<i>, task minAvailable = replicas, job minAvailable), so it runs
// the same with or without the webhook.

// CapacitySource gives the capacity a cluster last reported, for BestFit
// placement; Pipeline builds it from the status documents
// (volcano.Capacities).
type CapacitySource interface {
	CapacityFor(cluster string) (*placement.Capacity, bool)
}

// Files of Volcano units.
const (
	QueuesFile = "queues.yaml"
	JobFile    = "job.yaml"
)

// LabelGlobalJob names the GlobalJob on its rendered Jobs.
const LabelGlobalJob = "flotilla.dev/global-job"

// annotationRecreate is volcano.AnnotationRecreate (agent/volcano imports
// this package).
const annotationRecreate = "flotilla.dev/recreate"

// volcanoState is what compiling GlobalJobs derives once per Compile.
type volcanoState struct {
	jobs []*jobPlan
}

// jobPlan is one GlobalJob's spec (with defaults) and its pieces.
type jobPlan struct {
	job  *fleet.GlobalJob
	spec batchv1alpha1.JobSpec
	// pieces: per cluster, replicas per task (same order as spec.Tasks).
	pieces map[string][]int32
	memo   map[string]*unitContent
}

func (c *compiler) volcanoState() *volcanoState {
	if c.volcano != nil {
		return c.volcano
	}
	s := &volcanoState{}
	c.volcano = s
	for _, j := range c.repo.GlobalJobs {
		if p := c.planJob(j); p != nil {
			s.jobs = append(s.jobs, p)
		}
	}
	return s
}

func (c *compiler) jobError(j *fleet.GlobalJob, field string, kind error, format string, args ...any) {
	c.errs.addf(j.Source.File, j.Source.Line, field, kind, "", "job %s: %s", j.Metadata.Name, fmt.Sprintf(format, args...))
}

// planJob places one GlobalJob; nil after a reported problem.
func (c *compiler) planJob(j *fleet.GlobalJob) *jobPlan {
	p := &jobPlan{job: j, spec: defaultedSpec(j.Spec.Template), pieces: map[string][]int32{}, memo: map[string]*unitContent{}}
	dest := c.repo.Resolve(j.Spec.Placement.Destination)
	sort.Slice(dest, func(a, b int) bool { return dest[a].Metadata.Name < dest[b].Metadata.Name })
	switch j.Spec.Placement.Type {
	case fleet.GlobalJobPlacementDivided:
		weight := map[string]int64{}
		for _, w := range j.Spec.Placement.StaticWeightList {
			for _, n := range w.TargetCluster.ClusterNames {
				weight[n] = w.Weight
			}
		}
		ws := make([]placement.Weight, len(dest))
		for i, cl := range dest {
			ws[i] = placement.Weight{Cluster: cl.Metadata.Name, Weight: weight[cl.Metadata.Name]}
		}
		for ti, t := range p.spec.Tasks {
			shares, err := placement.Divide(int64(t.Replicas), ws)
			if err != nil {
				c.jobError(j, "spec.placement.staticWeightList", fleet.ErrInvalidValue, "divide %d replicas of task %s: %v", t.Replicas, t.Name, err)
				return nil
			}
			for _, sh := range shares {
				if p.pieces[sh.Cluster] == nil {
					p.pieces[sh.Cluster] = make([]int32, len(p.spec.Tasks))
				}
				p.pieces[sh.Cluster][ti] = int32(sh.Replicas)
			}
		}
		for cl, reps := range p.pieces {
			total := int32(0)
			for _, r := range reps {
				total += r
			}
			if total == 0 {
				delete(p.pieces, cl)
			}
		}
		if !c.wholeRoles(p) {
			return nil
		}
	case fleet.GlobalJobPlacementBestFit:
		cluster, ok := c.bestFit(p, dest)
		if !ok {
			return nil
		}
		if cluster == "" {
			return p
		}
		reps := make([]int32, len(p.spec.Tasks))
		for i, t := range p.spec.Tasks {
			reps[i] = t.Replicas
		}
		p.pieces[cluster] = reps
	default:
		c.jobError(j, "spec.placement.type", fleet.ErrInvalidValue, "unknown placement type %q", j.Spec.Placement.Type)
		return nil
	}
	return p
}

// wholeRoles reports a Divided job whose pieces leave a cluster without
// some task: each piece is a gang of its own, so a piece without its
// parameter server or driver would start and never make progress.
func (c *compiler) wholeRoles(p *jobPlan) bool {
	ok := true
	for _, cl := range sortedKeys(p.pieces) {
		reps := p.pieces[cl]
		for ti, t := range p.spec.Tasks {
			if t.Replicas <= 0 || reps[ti] > 0 {
				continue
			}
			ok = false
			c.jobError(p.job, "spec.placement", ErrIncompletePiece,
				"the piece on cluster %s has no replica of task %s (%d replicas divided over %d clusters); "+
					"every piece of a Divided job runs as a gang of its own and needs every task: "+
					"give task %s at least one replica per cluster, or use placement type %s to run the whole job on one cluster",
				cl, t.Name, t.Replicas, len(p.pieces), t.Name, fleet.GlobalJobPlacementBestFit)
		}
	}
	return ok
}

// bestFit chooses the BestFit cluster ("" with ok in validate-only mode
// when nothing is known).
func (c *compiler) bestFit(p *jobPlan, dest []*fleet.Cluster) (string, bool) {
	j := p.job
	var placed []string
	for _, cl := range dest {
		if slices.Contains(c.opts.Placed[j.Metadata.Name], cl.Metadata.Name) {
			placed = append(placed, cl.Metadata.Name)
		}
	}
	if len(placed) == 1 {
		return placed[0], true
	}
	queue := p.spec.Queue
	cands := make([]placement.Candidate, 0, len(dest))
	for _, cl := range dest {
		name := cl.Metadata.Name
		cand := placement.Candidate{Cluster: name, Queue: queue}
		declared := c.declaredQueueCapability(cl, queue)
		if cp, ok := c.capacityOf(name); ok && cp != nil {
			cand.Free = cp.Free
			if cand.Free == nil {
				cand.Free = corev1.ResourceList{}
			}
			if qf, ok := cp.QueueFree[queue]; ok {
				cand.QueueFree = qf
			} else {
				cand.QueueFree = declared
			}
		} else if len(cl.Spec.Capacity) > 0 {
			cand.Free, cand.QueueFree = cl.Spec.Capacity, declared
		}
		cands = append(cands, cand)
	}
	need := placement.GangRequests(placement.Gang(&p.spec))
	cluster, err := placement.BestFit(need, cands)
	if err == nil {
		return cluster, true
	}
	if c.opts.ValidateOnly {
		// Placement needs the clusters' reported capacity, which
		// validation does not read.
		return "", true
	}
	switch {
	case errors.Is(err, placement.ErrNoCapacity):
		c.jobError(j, "spec.placement", err, "no destination cluster (of %d) has reported capacity in status or declares spec.capacity", len(dest))
	default:
		c.jobError(j, "spec.placement", placement.ErrNoFit, "%v", err)
	}
	return "", false
}

func (c *compiler) capacityOf(cluster string) (*placement.Capacity, bool) {
	if c.opts.Capacity == nil {
		return nil, false
	}
	return c.opts.Capacity.CapacityFor(cluster)
}

// declaredQueueCapability is the capability a fleet of cl declares for
// queue there; nil when none does (no limit).
func (c *compiler) declaredQueueCapability(cl *fleet.Cluster, queue string) corev1.ResourceList {
	for _, f := range c.repo.FleetsOf(cl) {
		for _, q := range f.Spec.Queues {
			if q.Name != queue {
				continue
			}
			if cc, ok := q.ClusterCapability[cl.Metadata.Name]; ok {
				return cc
			}
			return q.Capability
		}
	}
	return nil
}

// defaultedSpec is the template with what Volcano's webhook defaults set.
func defaultedSpec(in batchv1alpha1.JobSpec) batchv1alpha1.JobSpec {
	spec := *in.DeepCopy()
	if spec.SchedulerName == "" {
		spec.SchedulerName = "volcano"
	}
	if spec.Queue == "" {
		spec.Queue = "default"
	}
	if spec.MaxRetry == 0 {
		spec.MaxRetry = 3
	}
	for i := range spec.Tasks {
		t := &spec.Tasks[i]
		if t.Name == "" {
			t.Name = "default" + strconv.Itoa(i)
		}
		if t.MinAvailable == nil {
			t.MinAvailable = ptr.To(t.Replicas)
		}
		if t.MaxRetry == 0 {
			t.MaxRetry = spec.MaxRetry
		}
	}
	spec.MinAvailable = placement.MinAvailable(&spec)
	return spec
}

// pieceSpec is the job's spec for one piece (replicas per task).
func pieceSpec(spec batchv1alpha1.JobSpec, reps []int32) batchv1alpha1.JobSpec {
	out := *spec.DeepCopy()
	var total, pieceTotal, taskMins int64
	kept := map[string]bool{}
	var tasks []batchv1alpha1.TaskSpec
	for i, t := range out.Tasks {
		total += int64(t.Replicas)
		r := reps[i]
		if r == 0 {
			continue
		}
		pieceTotal += int64(r)
		m := int32(placement.ScaleMin(int64(ptr.Deref(t.MinAvailable, t.Replicas)), int64(r), int64(t.Replicas)))
		t.MinAvailable = &m
		taskMins += int64(m)
		t.Replicas = r
		kept[t.Name] = true
		tasks = append(tasks, t)
	}
	for i := range tasks {
		if d := tasks[i].DependsOn; d != nil {
			var names []string
			for _, n := range d.Name {
				if kept[n] {
					names = append(names, n)
				}
			}
			if len(names) == 0 {
				tasks[i].DependsOn = nil
			} else {
				tasks[i].DependsOn.Name = names
			}
		}
	}
	out.Tasks = tasks
	m := placement.ScaleMin(int64(spec.MinAvailable), pieceTotal, total)
	m = min(max(m, 1, taskMins), pieceTotal)
	out.MinAvailable = int32(m)
	return out
}

// volcanoUnits returns the cluster's queue unit and job units; ok is false
// after a reported problem. deps are the units every job depends on
// besides the queues (namespaces, policies, identities).
func (c *compiler) volcanoUnits(cl *fleet.Cluster, deps []string) (units []fleetUnit, ok bool) {
	s := c.volcanoState()
	name := cl.Metadata.Name
	ok = true
	queues, good := c.queuesUnit(cl)
	if !good {
		ok = false
	} else if queues != nil {
		units = append(units, fleetUnit{
			unit: slice.Unit{
				Name: slice.UnitVolcanoQueues, Kind: slice.UnitVolcano, Path: slice.UnitDir(name, slice.UnitVolcanoQueues),
				Prune: true, Wait: true, Timeout: metav1.Duration{Duration: fleet.DefaultTimeout}, Hash: queues.hash,
			},
			content: queues,
		})
		deps = append(deps, slice.UnitVolcanoQueues)
	}
	deps = dedupeSorted(sortedCopy(deps))
	for _, p := range s.jobs {
		reps, placed := p.pieces[name]
		if !placed {
			continue
		}
		content := c.jobUnit(p, reps)
		if content == nil {
			ok = false
			continue
		}
		unitName := slice.VolcanoJobPrefix + p.job.Metadata.Name
		units = append(units, fleetUnit{
			unit: slice.Unit{
				Name: unitName, Kind: slice.UnitVolcano, Path: slice.UnitDir(name, unitName),
				DependsOn: append([]string(nil), deps...),
				// A job's health is its outcome, reported in status; the
				// unit is Ready once the job is submitted.
				Prune: true, Wait: false, Timeout: metav1.Duration{Duration: fleet.DefaultTimeout},
				Namespace: content.namespace, Hash: content.hash,
			},
			content: content,
		})
	}
	return units, ok
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// jobUnit renders one piece; clusters with the same piece share it.
func (c *compiler) jobUnit(p *jobPlan, reps []int32) *unitContent {
	key := fmt.Sprint(reps)
	if u, ok := p.memo[key]; ok {
		return u
	}
	j := p.job
	spec := p.spec
	if j.Spec.Placement.Type == fleet.GlobalJobPlacementDivided {
		spec = pieceSpec(p.spec, reps)
	}
	ns := j.Spec.Namespace
	if ns == "" {
		ns = "default"
	}
	specTree, err := jsonTree(spec)
	var u *unitContent
	if err == nil {
		meta := orderedMap{{"name", j.Metadata.Name}, {"namespace", ns}}.
			add("labels", map[string]any{LabelGlobalJob: j.Metadata.Name})
		if j.Spec.Recreate {
			meta = meta.add("annotations", map[string]any{annotationRecreate: "true"})
		}
		doc := orderedMap{{"apiVersion", batchv1alpha1.SchemeGroupVersion.String()}, {"kind", "Job"}, {"metadata", meta}, {"spec", specTree}}
		var data []byte
		if data, err = marshalDocs(doc); err == nil {
			if u, err = manifestsUnit([]string{JobFile}, []unitFile{{name: JobFile, data: data}}); err == nil {
				u.namespace = ns
			}
		}
	}
	if err != nil {
		c.jobError(j, "spec.template", fleet.ErrInvalidValue, "generate job: %v", err)
		u = nil
	}
	p.memo[key] = u
	return u
}

// jsonTree turns a typed value into the emitter's tree: JSON numbers kept
// exact, nulls (unset fields) left out.
func jsonTree(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var t any
	if err := dec.Decode(&t); err != nil {
		return nil, err
	}
	return dropNulls(t), nil
}

func dropNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			t[k] = dropNulls(e)
		}
	case []any:
		for i, e := range t {
			t[i] = dropNulls(e)
		}
	}
	return v
}

// queuesUnit is the unit of the queues the cluster's fleets declare; nil
// when they declare none. The same queue declared by two fleets of a
// cluster must be identical there.
func (c *compiler) queuesUnit(cl *fleet.Cluster) (*unitContent, bool) {
	type declared struct {
		spec  fleet.QueueSpec
		cap   corev1.ResourceList
		fleet *fleet.Fleet
	}
	byName := map[string]declared{}
	ok := true
	for _, f := range c.repo.FleetsOf(cl) {
		for i, q := range f.Spec.Queues {
			capability := q.Capability
			if cc, has := q.ClusterCapability[cl.Metadata.Name]; has {
				capability = cc
			}
			prev, seen := byName[q.Name]
			if !seen {
				byName[q.Name] = declared{spec: q, cap: capability, fleet: f}
				continue
			}
			if prev.spec.Weight != q.Weight || !ptrEqual(prev.spec.Reclaimable, q.Reclaimable) || !sameResources(prev.cap, capability) {
				c.errs.addf(f.Source.File, f.Source.Line, fmt.Sprintf("spec.queues[%d]", i), ErrConflict, cl.Metadata.Name,
					"queue %s is declared differently in %s (fleet %s); a queue must be identical in every fleet of a cluster",
					q.Name, prev.fleet.Source.File, prev.fleet.Metadata.Name)
				ok = false
			}
		}
	}
	if !ok || len(byName) == 0 {
		return nil, ok
	}
	docs := make([]any, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		d := byName[name]
		weight := d.spec.Weight
		if weight == 0 {
			weight = 1
		}
		spec := orderedMap{{"weight", int64(weight)}}
		if d.spec.Reclaimable != nil {
			spec = spec.add("reclaimable", *d.spec.Reclaimable)
		}
		if len(d.cap) > 0 {
			capMap := map[string]any{}
			for rn, q := range d.cap {
				capMap[string(rn)] = q.String()
			}
			spec = spec.add("capability", capMap)
		}
		docs = append(docs, orderedMap{
			{"apiVersion", "scheduling.volcano.sh/v1beta1"}, {"kind", "Queue"},
			{"metadata", orderedMap{{"name", name}}}, {"spec", spec},
		})
	}
	data, err := marshalDocs(docs...)
	var u *unitContent
	if err == nil {
		u, err = manifestsUnit([]string{QueuesFile}, []unitFile{{name: QueuesFile, data: data}})
	}
	if err != nil {
		c.errs.addf(cl.Source.File, cl.Source.Line, "", fleet.ErrInvalidValue, cl.Metadata.Name, "generate queues: %v", err)
		return nil, false
	}
	return u, true
}

func ptrEqual(a, b *bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameResources(a, b corev1.ResourceList) bool {
	return maps.EqualFunc(a, b, func(x, y resource.Quantity) bool { return x.Cmp(y) == 0 })
}

// namespaceDeps is the namespaces unit as a dependency, when there is one.
func namespaceDeps(ns *unitContent) []string {
	if ns == nil {
		return nil
	}
	return []string{slice.UnitNamespaces}
}
