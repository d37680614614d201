package apply

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// prune deletes the stale entries that still carry this unit's ownership
// labels and do not disable pruning, in reverse apply order (workloads
// before their namespaces, CRDs last). It returns the entries whose delete
// failed; they stay in the inventory.
func (a *Applier) prune(ctx context.Context, unit string, stale []Entry, res *UnitResult) ([]Entry, error) {
	ordered := append([]Entry(nil), stale...)
	sort.SliceStable(ordered, func(i, j int) bool {
		return ssa.SortableMetas{ordered[j].ID, ordered[i].ID}.Less(0, 1)
	})
	opts := ssa.DeleteOptions{
		PropagationPolicy: metav1.DeletePropagationBackground,
		Inclusions:        map[string]string{LabelManagedBy: ManagedByValue, LabelUnit: unit},
		Exclusions:        map[string]string{AnnotationPrune: Disabled, AnnotationReconcile: Disabled},
	}
	var (
		failed []Entry
		errs   []error
	)
	for _, e := range ordered {
		if isNamespace(e) {
			other, err := a.unmanagedIn(ctx, e.ID.Name)
			if err != nil {
				failed = append(failed, e)
				res.PruneFailed = append(res.PruneFailed, e.Subject())
				errs = append(errs, fmt.Errorf("keep %s: %w", e.Subject(), err))
				continue
			}
			if other != "" {
				res.PruneKept = append(res.PruneKept, e.Subject())
				res.KeptNamespaces = append(res.KeptNamespaces, fmt.Sprintf("%s kept: it holds %s, which Flotilla does not manage", e.Subject(), other))
				continue
			}
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(e.GroupVersionKind())
		obj.SetNamespace(e.ID.Namespace)
		obj.SetName(e.ID.Name)
		rctx, cancel := a.reqCtx(ctx)
		cse, err := a.rm.Delete(rctx, obj, opts)
		cancel()
		switch {
		case err != nil:
			failed = append(failed, e)
			res.PruneFailed = append(res.PruneFailed, e.Subject())
			errs = append(errs, objectError("delete", ErrPrune, obj, err))
		case cse.Action == ssa.SkippedAction:
			res.PruneKept = append(res.PruneKept, e.Subject())
		default:
			res.Pruned = append(res.Pruned, e.Subject())
		}
	}
	return failed, errors.Join(errs...)
}

// Delete removes a unit that left the slice: when its last apply had
// Prune set, its objects are pruned (same rules as Apply) and then its
// inventory; otherwise only the inventory goes and the objects are
// reported Orphaned. Objects whose delete fails keep the inventory alive
// (as Stale entries) for the next call. ErrNoInventory when the unit has
// none.
func (a *Applier) Delete(ctx context.Context, unit string) (*UnitResult, error) {
	return a.DeleteUnit(ctx, unit, nil)
}

// DeleteUnit is Delete, except that objects owners says another unit
// claims are released rather than pruned (handed over, see Owners).
func (a *Applier) DeleteUnit(ctx context.Context, unit string, owners Owners) (*UnitResult, error) {
	res := &UnitResult{Unit: unit}
	if err := validateUnitName(unit); err != nil {
		return res, err
	}
	defer a.lockUnit(unit)()
	inv, err := a.loadInventory(ctx, unit)
	if err != nil {
		return res, err
	}
	if inv.resourceVersion == "" {
		return res, fmt.Errorf("unit %s: %w", unit, ErrNoInventory)
	}
	if !inv.Prune {
		for _, e := range inv.Entries {
			res.Orphaned = append(res.Orphaned, e.Subject())
		}
		return res, a.deleteInventory(ctx, inv)
	}
	entries, held, releaseErr := a.release(ctx, unit, owners, inv.Entries, res)
	failed, pruneErr := a.prune(ctx, unit, entries, res)
	failed = append(failed, held...)
	pruneErr = errors.Join(releaseErr, pruneErr)
	if len(failed) == 0 {
		return res, a.deleteInventory(ctx, inv)
	}
	next := inv.clone()
	next.Entries = nil
	for _, e := range failed {
		e.State = Stale
		next.Entries = append(next.Entries, e)
	}
	sortEntries(next.Entries)
	res.ManagedObjects = 0
	if err := a.storeInventory(ctx, next); err != nil {
		return res, fmt.Errorf("unit %s: %w", unit, errors.Join(pruneErr, err))
	}
	return res, fmt.Errorf("unit %s: %w", unit, pruneErr)
}
