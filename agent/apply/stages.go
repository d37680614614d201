package apply

// Writing a unit: the staged server-side apply of the planned work, its
// dry-runs, and the rollback of a failed first create.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

// applyStages applies the objects stage by stage, waiting for written
// definitions and classes to become Current before the next stage. It
// stops at the first stage with a failure. Unless direct, every object of
// a stage passes a server-side dry-run, or needs only a repair, before any
// is written or repaired; when direct (nothing existed), a failure deletes
// the objects this call created.
func (a *Applier) applyStages(ctx context.Context, u UnitRequest, toApply []*work, direct bool, res *UnitResult) error {
	var created []*desired
	err := func() error {
		for stage := range numStages {
			var batch []*work
			for _, w := range toApply {
				if w.d.stage == stage {
					batch = append(batch, w)
				}
			}
			if len(batch) == 0 {
				continue
			}
			written, err := a.applyBatch(ctx, u, batch, direct, res, &created)
			if err != nil {
				return err
			}
			if stage != stageResources && len(written) > 0 {
				err := a.rm.WaitForSetWithContext(ctx, written, ssa.WaitOptions{Interval: a.opts.PollInterval, Timeout: a.timeout(u.Timeout)})
				if err != nil {
					return fmt.Errorf("%w: waiting for %s: %w", ErrHealthTimeout, plural.Count(len(written), "cluster definition", "cluster definitions"), err)
				}
			}
		}
		return nil
	}()
	if err == nil || !direct || len(created) == 0 {
		return err
	}
	return errors.Join(err, a.rollback(ctx, created, toApply, res))
}

// rollback deletes, in reverse order, the objects a failed direct apply
// created; they return to Pending in the inventory.
func (a *Applier) rollback(ctx context.Context, created []*desired, toApply []*work, res *UnitResult) error {
	byID := map[object.ObjMetadata]*work{}
	for _, w := range toApply {
		byID[w.d.id] = w
	}
	var errs []error
	rolledBack := map[object.ObjMetadata]bool{}
	for i := len(created) - 1; i >= 0; i-- {
		d := created[i]
		rctx, cancel := a.reqCtx(ctx)
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(d.obj.GroupVersionKind())
		live.SetNamespace(d.id.Namespace)
		live.SetName(d.id.Name)
		err := a.client.Delete(rctx, live, client.PropagationPolicy(metav1.DeletePropagationBackground))
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, objectError("roll back", ErrApply, d.obj, err))
			continue
		}
		if w := byID[d.id]; w != nil {
			w.entry = nil
		}
		rolledBack[d.id] = true
		res.Created--
	}
	res.ChangeSet = slices.DeleteFunc(res.ChangeSet, func(c ssa.ChangeSetEntry) bool { return rolledBack[c.ObjMetadata] })
	return errors.Join(errs...)
}

// allAbsent reports whether none of the objects exists (one metadata read
// each, far cheaper than a dry-run).
func (a *Applier) allAbsent(ctx context.Context, toApply []*work) (bool, error) {
	qs := make([]liveQuery, len(toApply))
	for i, w := range toApply {
		// w.live: read by claimConflicts.
		qs[i] = liveQuery{gvk: w.d.obj.GroupVersionKind(), id: w.d.id, known: w.live}
	}
	lives, _, err := a.lives(ctx, nil, qs)
	if err != nil {
		return false, err
	}
	for _, l := range lives {
		if l.exists {
			return false, nil
		}
	}
	return true, nil
}

// applyBatch applies one stage's objects in ssa order; consecutive objects
// of the same kind go in parallel. Unless direct, all are dry-run first and
// nothing is written, repairs included, unless every dry-run passes or
// needs only a repair. Objects it creates are appended to created.
func (a *Applier) applyBatch(ctx context.Context, u UnitRequest, batch []*work, direct bool, res *UnitResult, created *[]*desired) (object.ObjMetadataSet, error) {
	dry := make([]*unstructured.Unstructured, len(batch))
	if !direct {
		// First a pure pass: every object's dry-run passes, or fails in a
		// way a repair may fix. Only then are repairs made (they write:
		// ownership moved, an object deleted and created again, or
		// replaced), so a sibling whose dry-run fails leaves every object
		// as it was.
		repair := make([]bool, len(batch))
		dryErrs := make([]error, len(batch)) // what each repair starts from
		if err := a.eachOf(ctx, batch, func(ctx context.Context, i int, w *work) (err error) {
			dry[i], repair[i], dryErrs[i], err = a.probe(ctx, u, w)
			return err
		}); err != nil {
			return nil, err
		}
		if err := a.eachOf(ctx, batch, func(ctx context.Context, i int, w *work) (err error) {
			if repair[i] {
				dry[i], err = a.repairAndDryRun(ctx, u, w, dry[i], dryErrs[i])
			}
			return err
		}); err != nil {
			return nil, err
		}
	}

	applied := make([]*unstructured.Unstructured, len(batch))
	wasCreated := make([]bool, len(batch))
	applyErrs := make([]error, len(batch))
	for start := 0; start < len(batch); {
		end := start + 1
		for end < len(batch) && batch[end].d.id.GroupKind == batch[start].d.id.GroupKind {
			end++
		}
		// No shared cancellation: a failure lets in-flight applies finish,
		// so each error reported is a real one.
		var g errgroup.Group
		g.SetLimit(a.opts.Concurrency)
		for i := start; i < end; i++ {
			if skipReason(u, batch[i].d, dry[i]) != "" {
				continue
			}
			g.Go(func() error {
				applied[i], wasCreated[i], applyErrs[i] = a.apply(ctx, batch[i].d)
				return applyErrs[i]
			})
		}
		err := g.Wait()
		for i := start; i < end; i++ {
			if wasCreated[i] {
				*created = append(*created, batch[i].d)
			}
		}
		if err != nil {
			break
		}
		start = end
	}

	var written object.ObjMetadataSet
	for i, w := range batch {
		d, dr := w.d, dry[i]
		switch skipReason(u, d, dr) {
		case ssa.SkippedAction:
			res.Disabled++
			res.ChangeSet = append(res.ChangeSet, changeEntry(d, ssa.SkippedAction))
			continue
		case ssa.UnchangedAction:
			w.entry = &Entry{ID: d.id, Version: d.version, State: Applied, ContentHash: d.contentHash}
			res.Unchanged++
			res.ChangeSet = append(res.ChangeSet, changeEntry(d, ssa.UnchangedAction))
			continue
		}
		if applied[i] == nil {
			continue // not reached, or failed
		}
		w.entry = &Entry{
			ID: d.id, Version: d.version, State: Applied, ContentHash: d.contentHash,
			Fingerprint: fingerprint(applied[i].GetManagedFields(), a.opts.FieldManager),
		}
		var action ssa.Action
		switch {
		case wasCreated[i]:
			action = ssa.CreatedAction
			res.Created++
		case dr != nil && applied[i].GetResourceVersion() == dr.GetResourceVersion() && !w.replaced:
			action = ssa.UnchangedAction
			res.Unchanged++
		default:
			action = ssa.ConfiguredAction
			res.Configured++
		}
		if action != ssa.UnchangedAction {
			written = append(written, d.id)
			if w.drift {
				res.DriftCorrected++
			}
		}
		res.ChangeSet = append(res.ChangeSet, changeEntry(d, action))
	}
	return written, errors.Join(applyErrs...)
}

// skipReason says why an object that passed its dry-run is not applied:
// SkippedAction when the live object is disabled (and Git does not set
// that annotation itself), UnchangedAction when the unit is create-only and
// the object exists; "" to apply it (and always without a dry-run).
func skipReason(u UnitRequest, d *desired, dr *unstructured.Unstructured) ssa.Action {
	if dr == nil || dr.GetResourceVersion() == "" {
		return ""
	}
	if _, gitSetsKey := d.obj.GetAnnotations()[AnnotationReconcile]; !gitSetsKey && isDisabled(dr.GetAnnotations()) {
		return ssa.SkippedAction
	}
	if u.CreateOnly {
		return ssa.UnchangedAction
	}
	return ""
}

// eachOf runs fn for every object of the batch, up to Concurrency at a
// time, and joins their errors; every fn runs to its end.
func (a *Applier) eachOf(ctx context.Context, batch []*work, fn func(ctx context.Context, i int, w *work) error) error {
	var g errgroup.Group
	g.SetLimit(a.opts.Concurrency)
	errs := make([]error, len(batch))
	for i, w := range batch {
		g.Go(func() error {
			errs[i] = fn(ctx, i, w)
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// dryRunOnly is one server-side dry-run apply of the object.
func (a *Applier) dryRunOnly(ctx context.Context, d *desired) (*unstructured.Unstructured, error) {
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	obj, _, err := a.serverSideApply(rctx, d.obj, true)
	return obj, err
}

// probe dry-runs the object and writes nothing. It returns the object as
// the API server would store it, or repair when the object needs
// repairAndDryRun first: fields that imperative edits own are taken over
// (takeover.go) when the dry-run shows such fields, or fails as Invalid
// while such a manager owns fields of the live object; the object is
// recreated when the apply changes an immutable field and the unit allows
// that; it is replaced when it is Invalid while its content is what was
// last applied successfully (the live object's drift, not Git, makes the
// merge invalid). Any other failure is the object's error. For a repair,
// dryErr is the dry-run's own error (nil when it passed with fields to
// take over), which repairAndDryRun starts from.
func (a *Applier) probe(ctx context.Context, u UnitRequest, w *work) (obj *unstructured.Unstructured, repair bool, dryErr, err error) {
	d := w.d
	obj, dryErr = a.dryRunOnly(ctx, d)
	switch {
	case dryErr == nil:
		return obj, !u.CreateOnly && skipReason(u, d, obj) == "" && a.foreignFields(obj.GetManagedFields()), nil, nil
	case u.RecreateImmutable && isImmutable(dryErr):
		return nil, true, dryErr, nil
	case !u.CreateOnly && apierrors.IsInvalid(dryErr) && !isImmutable(dryErr):
		takeOver := w.live == nil || (w.live.exists && w.live.foreign)
		if w.drift || takeOver {
			return nil, true, dryErr, nil
		}
	}
	return nil, false, nil, objectError("dry-run", ErrApply, d.obj, dryErr)
}

// repairAndDryRun makes the repairs probe found needed (see probe), from
// probe's dry-run (obj, err), and returns the dry-run after them.
func (a *Applier) repairAndDryRun(ctx context.Context, u UnitRequest, w *work, obj *unstructured.Unstructured, err error) (*unstructured.Unstructured, error) {
	d := w.d
	if !u.CreateOnly && (err == nil && skipReason(u, d, obj) == "" && a.foreignFields(obj.GetManagedFields()) || apierrors.IsInvalid(err)) {
		took, terr := a.takeOver(ctx, d)
		if terr != nil {
			return nil, objectError("take over fields", ErrApply, d.obj, terr)
		}
		if took {
			obj, err = a.dryRunOnly(ctx, d)
		}
	}
	switch {
	case err == nil:
	case u.RecreateImmutable && isImmutable(err):
		if rerr := a.recreate(ctx, d); rerr != nil {
			return nil, objectError("recreate", ErrApply, d.obj, rerr)
		}
		obj, err = a.dryRunOnly(ctx, d)
	case w.drift && !u.CreateOnly && apierrors.IsInvalid(err) && !isImmutable(err):
		if rerr := a.replace(ctx, d); rerr != nil {
			return nil, objectError("replace", ErrApply, d.obj, rerr)
		}
		w.replaced = true
		if _, terr := a.takeOver(ctx, d); terr != nil {
			return nil, objectError("take over fields", ErrApply, d.obj, terr)
		}
		obj, err = a.dryRunOnly(ctx, d)
	}
	if err != nil {
		return nil, objectError("dry-run", ErrApply, d.obj, err)
	}
	return obj, nil
}

func (a *Applier) apply(ctx context.Context, d *desired) (*unstructured.Unstructured, bool, error) {
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	obj, created, err := a.serverSideApply(rctx, d.obj, false)
	if err != nil {
		return nil, false, objectError("apply", ErrApply, d.obj, err)
	}
	return obj, created, nil
}

// recreate deletes the live object and waits until it is gone.
func (a *Applier) recreate(ctx context.Context, d *desired) error {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(d.obj.GroupVersionKind())
	live.SetNamespace(d.id.Namespace)
	live.SetName(d.id.Name)
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	if err := a.client.Delete(rctx, live, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return wait.PollUntilContextCancel(rctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := a.client.Get(ctx, client.ObjectKeyFromObject(live), live)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
