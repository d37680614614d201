package volcano

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/placement"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Applier is what the Manager needs of agent/apply; *apply.Applier
// implements it.
type Applier interface {
	Apply(ctx context.Context, u apply.UnitRequest) (*apply.UnitResult, error)
	Inventory(ctx context.Context, unit string) (*apply.Inventory, error)
}

// Options configure a Manager.
type Options struct {
	// Applier creates jobs and keeps their units' inventories. Required.
	Applier Applier
	// CompletedRetention keeps a finished job whose unit left the slice
	// this long after it finished; DefaultCompletedRetention when zero.
	CompletedRetention time.Duration
	// RequestTimeout bounds each API request; 30s when zero.
	RequestTimeout time.Duration
	// DeleteWait bounds how long SubmitJob waits for a deleted job to be
	// gone before it creates the new one (it goes on next cycle
	// otherwise); 1m when zero.
	DeleteWait time.Duration
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
}

// Manager submits Volcano job units and reports jobs and capacity for one
// cluster. Safe for concurrent use.
type Manager struct {
	opts   Options
	client client.Client
	disc   discovery.CachedDiscoveryInterfaceWithContext

	discoveryMu sync.Mutex // one discovery at a time
	checkedAt   time.Time
	installed   error // nil or ErrNotInstalled, as of checkedAt

	mu          sync.Mutex
	lastResults map[string]*JobResult
	lastReport  *Report
}

// discoveryCache is how long a Volcano discovery answer is reused.
const discoveryCache = 15 * time.Second

// Scheme is the types the Manager's client knows: Kubernetes' and
// Volcano's jobs, queues and PodGroups.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = batchv1alpha1.AddToScheme(s)
	_ = schedulingv1beta1.AddToScheme(s)
	return s
}

// NewManager builds a Manager with clients of its own for cfg; a process
// that has apply.Clients for the cluster already uses NewManagerWithClients.
func NewManager(cfg *rest.Config, opts Options) (*Manager, error) {
	c, err := apply.NewClients(cfg, Scheme())
	if err != nil {
		return nil, fmt.Errorf("volcano clients: %w", err)
	}
	return NewManagerWithClients(c, opts)
}

// NewManagerWithClients builds a Manager on c, whose client must know
// Volcano's types (apply.NewClients with Scheme()). Installed invalidates
// c.Discovery when its own answer is stale.
func NewManagerWithClients(c *apply.Clients, opts Options) (*Manager, error) {
	if opts.Applier == nil {
		return nil, errors.New("volcano: Options.Applier is required")
	}
	if c == nil || c.Client == nil || c.Discovery == nil {
		return nil, errors.New("volcano: clients from apply.NewClients are required")
	}
	for _, gvk := range []schema.GroupVersionKind{
		batchv1alpha1.SchemeGroupVersion.WithKind("Job"),
		schedulingv1beta1.SchemeGroupVersion.WithKind("Queue"),
		schedulingv1beta1.SchemeGroupVersion.WithKind("PodGroup"),
	} {
		if !c.Client.Scheme().Recognizes(gvk) {
			return nil, fmt.Errorf("volcano: the client's scheme does not know %s; build it with volcano.Scheme()", gvk)
		}
	}
	if opts.CompletedRetention <= 0 {
		opts.CompletedRetention = DefaultCompletedRetention
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	if opts.DeleteWait <= 0 {
		opts.DeleteWait = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Manager{opts: opts, client: c.Client, disc: c.Discovery, lastResults: map[string]*JobResult{}}, nil
}

func (m *Manager) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.opts.RequestTimeout)
}

// Installed returns nil when the cluster serves Volcano's jobs, queues and
// PodGroups, ErrNotInstalled when it does not (answers are reused for a
// few seconds), or the discovery error.
// The error is a *status.Failure (reason ReasonNotInstalled for
// ErrNotInstalled).
func (m *Manager) Installed(ctx context.Context) error {
	return failureOf(m.installedNow(ctx))
}

func (m *Manager) installedNow(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.discoveryMu.Lock()
	defer m.discoveryMu.Unlock()
	if !m.checkedAt.IsZero() && m.opts.Now().Sub(m.checkedAt) < discoveryCache {
		return m.installed
	}
	want := map[string]string{
		batchv1alpha1.SchemeGroupVersion.String():     "jobs",
		schedulingv1beta1.SchemeGroupVersion.String(): "queues",
	}
	// The discovery cache is shared; refresh it, as this answer is stale.
	dctx, cancel := m.reqCtx(ctx)
	defer cancel()
	m.disc.InvalidateWithContext(dctx)
	for gv, resource := range want {
		list, err := m.disc.ServerResourcesForGroupVersionWithContext(dctx, gv)
		switch {
		// The cache answers ErrCacheNotFound for a group version the
		// server does not serve.
		case apierrors.IsNotFound(err), errors.Is(err, memory.ErrCacheNotFound):
			m.checkedAt, m.installed = m.opts.Now(), ErrNotInstalled
			return ErrNotInstalled
		case err != nil:
			return fmt.Errorf("discover %s: %w", gv, err)
		}
		found := false
		for _, r := range list.APIResources {
			found = found || r.Name == resource
		}
		if !found {
			m.checkedAt, m.installed = m.opts.Now(), ErrNotInstalled
			return ErrNotInstalled
		}
	}
	m.checkedAt, m.installed = m.opts.Now(), nil
	return nil
}

// JobRequest is a rendered job unit.
type JobRequest struct {
	Unit string
	// Revision and Hash (the unit's content hash) go to its inventory.
	Revision string
	Hash     string
	Objects  []*unstructured.Unstructured
	Prune    bool
	Timeout  time.Duration
	Observed *apply.Observation
}

// JobAction is what SubmitJob did.
type JobAction string

// Actions.
const (
	// ActionCreated: the job was submitted; ActionRecreated: after deleting
	// the previous one.
	ActionCreated   JobAction = "Created"
	ActionRecreated JobAction = "Recreated"
	// ActionUnchanged: the live job has the rendered spec.
	ActionUnchanged JobAction = "Unchanged"
	// ActionNotSubmitted: the preflight found the gang Unschedulable.
	ActionNotSubmitted JobAction = "NotSubmitted"
	// ActionKept: the spec changed but the job is still running.
	ActionKept JobAction = "Kept"
	// ActionTerminating: the previous job is still being deleted.
	ActionTerminating JobAction = "Terminating"
	// ActionGone: the job was created at this spec and deleted since by
	// someone else; it is not re-run.
	ActionGone JobAction = "Gone"
)

// JobResult is the outcome of SubmitJob.
type JobResult struct {
	Job      types.NamespacedName
	SpecHash string
	Action   JobAction
	// Ready: the job is submitted at the rendered spec (or was, and is
	// gone). Otherwise Reason (a unit condition reason) and Message say why.
	Ready   bool
	Reason  string
	Message string
	// Preflight is set when the gang was checked (only before a create).
	Preflight *PreflightResult
	// Applied is Apply's result when Apply was called.
	Applied *apply.UnitResult
}

// SubmitJob brings a job unit to its rendered state with job semantics:
// see the package documentation. The error is ErrNotInstalled,
// ErrInvalidUnit, ErrNotOwned (with a result), or an API or apply error.
func (m *Manager) SubmitJob(ctx context.Context, req JobRequest) (*JobResult, error) {
	if err := m.installedNow(ctx); err != nil {
		return nil, err
	}
	job, err := jobObject(req.Objects)
	if err != nil {
		return nil, fmt.Errorf("unit %s: %w", req.Unit, err)
	}
	if job.GetNamespace() == "" {
		job.SetNamespace("default")
	}
	res := &JobResult{Job: types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}, SpecHash: SpecHash(job)}
	recreate := job.GetAnnotations()[AnnotationRecreate] == "true"
	setAnnotation(job, AnnotationSpecHash, res.SpecHash)

	res, err = m.submit(ctx, req, job, recreate, res)
	if res != nil {
		m.mu.Lock()
		m.lastResults[req.Unit] = res
		m.mu.Unlock()
	}
	return res, failureOf(err)
}

// failureOf gives a job unit's error its condition reason and whether it
// stalls; an apply error keeps the one agent/apply gave it, anything else
// (an API error) is a retried ApplyFailed.
func failureOf(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotInstalled):
		return status.Retrying(ReasonNotInstalled, err)
	case errors.Is(err, ErrNotOwned):
		return status.Stalling(ReasonNotOwned, err)
	case errors.Is(err, ErrInvalidUnit):
		return status.Stalling(status.ReasonApplyFailed, err)
	}
	return status.FailureOf(err, status.ReasonApplyFailed)
}

func (m *Manager) submit(ctx context.Context, req JobRequest, job *unstructured.Unstructured, recreate bool, res *JobResult) (*JobResult, error) {
	live, err := m.getJob(ctx, res.Job)
	if err != nil {
		return nil, err
	}
	action := ActionCreated
	if live != nil {
		if live.Labels[apply.LabelManagedBy] != apply.ManagedByValue || live.Labels[apply.LabelUnit] != req.Unit {
			res.Reason = ReasonNotOwned
			res.Message = fmt.Sprintf("job %s exists and was not created by flotilla for unit %s; it is left alone", res.Job, req.Unit)
			return res, fmt.Errorf("%s: %w", res.Message, ErrNotOwned)
		}
		switch {
		case live.DeletionTimestamp != nil:
			return terminating(res), nil
		case live.Annotations[AnnotationSpecHash] == res.SpecHash:
			// Nothing to submit; Apply only records the unit's hash in its
			// inventory (it never updates a create-only object).
			res.Action, res.Ready = ActionUnchanged, true
			res.Applied, err = m.apply(ctx, req, job, false)
			return res, err
		case active(live.Status.State.Phase) && !recreate:
			res.Action, res.Reason, res.Message = ActionKept, ReasonSpecChanged, MessageSpecChanged
			return res, nil
		}
		// Finished (a new spec is a new run) or recreate asked for.
		gone, err := m.deleteJob(ctx, live)
		if err != nil {
			return nil, err
		}
		if !gone {
			return terminating(res), nil
		}
		action = ActionRecreated
	} else {
		inv, err := m.opts.Applier.Inventory(ctx, req.Unit)
		if err != nil && !errors.Is(err, apply.ErrNoInventory) {
			return nil, err
		}
		if inv != nil && inv.Hash == req.Hash && inventoryHasJob(inv, res.Job) {
			res.Action, res.Ready = ActionGone, true
			res.Message = "the job was deleted after it was submitted; it is not run again until its spec changes"
			return res, nil
		}
	}

	pf, err := m.preflight(ctx, job)
	if err != nil {
		return nil, err
	}
	res.Preflight = &pf
	if pf.Verdict == Unschedulable {
		res.Action, res.Reason, res.Message = ActionNotSubmitted, ReasonUnschedulable, "Unschedulable: "+pf.Message
		return res, nil
	}
	if pf.Verdict != "" {
		setAnnotation(job, AnnotationPreflight, string(pf.Verdict))
	}
	res.Applied, err = m.apply(ctx, req, job, true)
	if err != nil {
		return res, err
	}
	res.Action, res.Ready = action, true
	if pf.Verdict == Waiting {
		res.Message = pf.Message
	}
	return res, nil
}

func terminating(res *JobResult) *JobResult {
	res.Action, res.Reason = ActionTerminating, ReasonJobTerminating
	res.Message = "the previous job is being deleted; the new spec is submitted once it is gone"
	return res
}

func (m *Manager) apply(ctx context.Context, req JobRequest, job *unstructured.Unstructured, create bool) (*apply.UnitResult, error) {
	return m.opts.Applier.Apply(ctx, apply.UnitRequest{
		Name: req.Unit, Revision: req.Revision, Hash: req.Hash,
		Objects: []*unstructured.Unstructured{job},
		Prune:   req.Prune, Timeout: req.Timeout,
		// Created once, never updated; Force creates a job the inventory
		// records as applied (after a delete for a new run).
		CreateOnly: true, Force: create,
		Observed: req.Observed,
	})
}

func inventoryHasJob(inv *apply.Inventory, nn types.NamespacedName) bool {
	for _, e := range inv.Entries {
		if e.State == apply.Applied && e.ID.GroupKind.Group == batchv1alpha1.GroupName && e.ID.GroupKind.Kind == "Job" &&
			e.ID.Namespace == nn.Namespace && e.ID.Name == nn.Name {
			return true
		}
	}
	return false
}

// active reports a phase in which the job may still run pods.
func active(p batchv1alpha1.JobPhase) bool {
	return !finished(p)
}

// finished reports a final phase.
func finished(p batchv1alpha1.JobPhase) bool {
	switch p {
	case batchv1alpha1.Completed, batchv1alpha1.Failed, batchv1alpha1.Aborted, batchv1alpha1.Terminated:
		return true
	}
	return false
}

func (m *Manager) getJob(ctx context.Context, nn types.NamespacedName) (*batchv1alpha1.Job, error) {
	rctx, cancel := m.reqCtx(ctx)
	defer cancel()
	j := &batchv1alpha1.Job{}
	if err := m.client.Get(rctx, nn, j); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get job %s: %w", nn, err)
	}
	return j, nil
}

// deleteJob deletes a job in the foreground (its pods and PodGroup first,
// so the new job's pods, which take the same names, do not collide) and
// waits up to DeleteWait for it to be gone.
func (m *Manager) deleteJob(ctx context.Context, j *batchv1alpha1.Job) (bool, error) {
	nn := types.NamespacedName{Namespace: j.Namespace, Name: j.Name}
	rctx, cancel := m.reqCtx(ctx)
	err := m.client.Delete(rctx, j, client.PropagationPolicy(metav1.DeletePropagationForeground), client.Preconditions{UID: &j.UID})
	cancel()
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("delete job %s: %w", nn, err)
	}
	deadline := time.Now().Add(m.opts.DeleteWait)
	for {
		live, err := m.getJob(ctx, nn)
		if err != nil {
			return false, err
		}
		if live == nil || live.UID != j.UID {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// preflight checks the job's gang against the live cluster.
func (m *Manager) preflight(ctx context.Context, job *unstructured.Unstructured) (PreflightResult, error) {
	typed := &batchv1alpha1.Job{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(job.Object, typed); err != nil {
		return PreflightResult{}, fmt.Errorf("%w: job %s: %w", ErrInvalidUnit, job.GetName(), err)
	}
	snap, err := m.snapshot(ctx)
	if err != nil {
		return PreflightResult{}, err
	}
	if !snap.nodesKnown || !snap.podsKnown {
		// Not allowed to read nodes or pods (a namespaced tenant): submit
		// without a verdict and let Volcano decide.
		return PreflightResult{Message: "preflight skipped: the agent may not list nodes and pods"}, nil
	}
	queueName := typed.Spec.Queue
	if queueName == "" {
		queueName = "default"
	}
	q, ok := snap.queues[queueName]
	switch {
	case !snap.queuesKnown:
		return Preflight(placement.Gang(&typed.Spec), snap.nodeInfos(), nil), nil
	case !ok:
		return PreflightResult{Unschedulable, fmt.Sprintf("queue %s does not exist on this cluster", queueName)}, nil
	case q.Status.State != "" && q.Status.State != schedulingv1beta1.QueueStateOpen:
		return PreflightResult{Unschedulable, fmt.Sprintf("queue %s is %s", queueName, q.Status.State)}, nil
	}
	qi := &QueueInfo{Name: queueName, Capability: q.Spec.Capability, Allocated: snap.queueAllocated[queueName]}
	return Preflight(placement.Gang(&typed.Spec), snap.nodeInfos(), qi), nil
}

// RetainRemoved reports whether a job unit that left the slice must be
// kept for now: its job finished less than CompletedRetention ago. A unit
// without a job, a job still active or one finished longer ago is not
// kept (the loop deletes it).
func (m *Manager) RetainRemoved(ctx context.Context, unit string) (bool, error) {
	inv, err := m.opts.Applier.Inventory(ctx, unit)
	if errors.Is(err, apply.ErrNoInventory) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range inv.Entries {
		if e.ID.GroupKind.Group != batchv1alpha1.GroupName || e.ID.GroupKind.Kind != "Job" {
			continue
		}
		live, err := m.getJob(ctx, types.NamespacedName{Namespace: e.ID.Namespace, Name: e.ID.Name})
		if err != nil {
			return false, err
		}
		if live == nil || !finished(live.Status.State.Phase) || live.Labels[apply.LabelUnit] != unit {
			continue
		}
		if at := finishedAt(live); at != nil && m.opts.Now().Sub(at.Time) < m.opts.CompletedRetention {
			return true, nil
		}
	}
	return false, nil
}

// jobObject returns a copy of the unit's only object, which must be a
// batch.volcano.sh Job.
func jobObject(objs []*unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if len(objs) != 1 {
		return nil, fmt.Errorf("%w: it renders %d objects, want one batch.volcano.sh Job", ErrInvalidUnit, len(objs))
	}
	o := objs[0]
	gvk := o.GroupVersionKind()
	if gvk.Group != batchv1alpha1.GroupName || gvk.Kind != "Job" {
		return nil, fmt.Errorf("%w: it renders a %s, want one batch.volcano.sh Job", ErrInvalidUnit, gvk.String())
	}
	if o.GetName() == "" {
		return nil, fmt.Errorf("%w: the job has no name", ErrInvalidUnit)
	}
	return o.DeepCopy(), nil
}

// SpecHash identifies what would be submitted: "sha256:<hex>" over the
// job's apiVersion, kind, name, namespace, labels, annotations (but
// Flotilla's own job annotations) and spec.
func SpecHash(job *unstructured.Unstructured) string {
	ann := map[string]string{}
	for k, v := range job.GetAnnotations() {
		switch k {
		case AnnotationSpecHash, AnnotationRecreate, AnnotationPreflight:
			continue
		}
		ann[k] = v
	}
	doc := map[string]any{
		"apiVersion":  job.GetAPIVersion(),
		"kind":        job.GetKind(),
		"name":        job.GetName(),
		"namespace":   job.GetNamespace(),
		"labels":      job.GetLabels(),
		"annotations": ann,
		"spec":        job.Object["spec"],
	}
	b, err := json.Marshal(doc) // map keys sorted: stable
	if err != nil {
		b = []byte(fmt.Sprint(doc))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func setAnnotation(o *unstructured.Unstructured, key, value string) {
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[key] = value
	o.SetAnnotations(ann)
}
