package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/object"
)

// One owner per object. An object whose live copy carries another unit's
// ownership labels is taken over only when that unit no longer claims it
// (Owners.Claims: the unit left the desired state, or renders the object no
// more at the revision being applied); otherwise it is left alone and the
// unit fails with ErrConflict naming the object and its owner, after the
// rest of the unit was applied. A stale object that another unit claims is
// released — dropped from the inventory without a delete — so that moving
// an object between units in one revision never deletes it, whichever of
// the two is applied first.

// ErrConflict: an object of the unit belongs to another unit that still
// claims it; it was not applied.
var ErrConflict = errors.New("object belongs to another unit")

// Owners answers, for the revision being applied, which units claim an
// object; the agent implements it from its slice. Calls must not apply
// anything and may come concurrently.
type Owners interface {
	// Claims reports whether unit renders id at the revision being
	// applied (false for a unit not in the desired state).
	Claims(ctx context.Context, unit string, id object.ObjMetadata) (bool, error)
	// ClaimedBy names a unit other than unit that renders id at the
	// revision being applied, "" when none does.
	ClaimedBy(ctx context.Context, unit string, id object.ObjMetadata) (string, error)
}

// ClaimedObjects returns what a unit's inventory in the cluster says it
// owns, and the hash it was last applied at: complete is false when an
// entry is not Applied (an interrupted apply or failed prune), so the
// caller cannot rely on the list for the hash. It takes no unit lock, so an
// Owners implementation may call it during another unit's Apply.
func (a *Applier) ClaimedObjects(ctx context.Context, unit string) (hash string, ids []object.ObjMetadata, complete bool, err error) {
	if err := validateUnitName(unit); err != nil {
		return "", nil, false, err
	}
	inv, err := a.loadInventory(ctx, unit)
	if err != nil {
		return "", nil, false, err
	}
	complete = inv.resourceVersion != ""
	for _, e := range inv.Entries {
		if e.State != Applied {
			complete = false
		}
		if e.State != Stale {
			ids = append(ids, e.ID)
		}
	}
	return inv.Hash, ids, complete, nil
}

// inventoryOwners is the rule without an Owners: a unit claims what its
// inventory lists.
type inventoryOwners struct{ a *Applier }

func (o inventoryOwners) Claims(ctx context.Context, unit string, id object.ObjMetadata) (bool, error) {
	_, ids, _, err := o.a.ClaimedObjects(ctx, unit)
	if err != nil {
		return true, err
	}
	for _, x := range ids {
		if x == id {
			return true, nil
		}
	}
	return false, nil
}

func (inventoryOwners) ClaimedBy(context.Context, string, object.ObjMetadata) (string, error) {
	return "", nil
}

func (a *Applier) owners(u UnitRequest) Owners {
	if u.Owners != nil {
		return u.Owners
	}
	return inventoryOwners{a}
}

// liveOwner is the unit named by a live object's ownership labels, "" when
// it has none (or does not exist).
func liveOwner(l liveMeta) string {
	if !l.exists || l.labels[LabelManagedBy] != ManagedByValue {
		return ""
	}
	return l.labels[LabelUnit]
}

// claimConflicts takes out of toApply the objects another unit owns and
// still claims, recording them in res, and returns the rest and an error
// per conflict (ErrConflict).
func (a *Applier) claimConflicts(ctx context.Context, u UnitRequest, prev *Inventory, toApply []*work, res *UnitResult) ([]*work, []error, error) {
	if u.CreateOnly {
		return toApply, nil, nil
	}
	obs := u.Observed.forUnit(prev)
	qs := make([]liveQuery, len(toApply))
	for i, w := range toApply {
		// An object new to the unit is read: the observation, taken at the
		// start of a pass, may predate another unit creating it.
		qs[i] = liveQuery{gvk: w.d.obj.GroupVersionKind(), id: w.d.id, known: w.live, observed: w.prev != nil}
	}
	lives, read, err := a.lives(ctx, obs, qs)
	if err != nil {
		return nil, nil, err
	}
	owners := make([]string, len(toApply))
	for i, w := range toApply {
		owners[i] = liveOwner(lives[i])
		if read[i] {
			// allAbsent reuses the read (an observation's absence would
			// not do: it lists only managed objects).
			w.live = &lives[i]
		}
	}
	own := a.owners(u)
	kept := toApply[:0:0]
	var conflicts []error
	for i, w := range toApply {
		owner := owners[i]
		if owner == "" || owner == u.Name {
			kept = append(kept, w)
			continue
		}
		claimed, err := own.Claims(ctx, owner, w.d.id)
		if err != nil {
			// Unknown: do not take it; the next apply asks again.
			claimed = true
		}
		if !claimed {
			res.TakenOver = append(res.TakenOver, fmt.Sprintf("%s from unit %s", w.d.subject(), owner))
			kept = append(kept, w)
			continue
		}
		w.conflict = true
		res.Conflicts = append(res.Conflicts, fmt.Sprintf("%s belongs to unit %s", w.d.subject(), owner))
		gvk := w.d.obj.GroupVersionKind()
		conflicts = append(conflicts, &ObjectError{Op: "take over", Group: gvk.Group, Kind: gvk.Kind, Namespace: w.d.id.Namespace, Name: w.d.id.Name,
			Class: ErrConflict, Cause: fmt.Errorf("unit %s still renders it", owner)})
	}
	return kept, conflicts, nil
}

// release sorts stale entries before a prune: those another unit claims
// leave this unit's inventory without a delete, for that unit to take
// over (res.HandedOver); those whose claimant cannot be told are held —
// neither pruned nor released — and reported as an ErrPrune error, so the
// next apply asks again; the rest are returned for pruning.
func (a *Applier) release(ctx context.Context, unit string, owners Owners, stale []Entry, res *UnitResult) (prune, held []Entry, err error) {
	if owners == nil {
		return stale, nil, nil
	}
	var errs []error
	for _, e := range stale {
		to, cerr := owners.ClaimedBy(ctx, unit, e.ID)
		switch {
		case cerr != nil:
			held = append(held, e)
			res.PruneKept = append(res.PruneKept, e.Subject())
			errs = append(errs, fmt.Errorf("%w: %s kept: which unit renders it now is unknown: %w", ErrPrune, e.Subject(), cerr))
		case to != "":
			res.HandedOver = append(res.HandedOver, fmt.Sprintf("%s to unit %s", e.Subject(), to))
		default:
			prune = append(prune, e)
		}
	}
	return prune, held, errors.Join(errs...)
}
