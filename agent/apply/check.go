package apply

import (
	"context"
)

// UnitCheck is what Check found about a unit without rendering it.
type UnitCheck struct {
	Unit string
	// Exists: the unit has an inventory in the cluster.
	Exists bool
	// Hash, Prune and Revision as recorded by the unit's last apply.
	Hash     string
	Prune    bool
	Revision string
	// Complete: every inventory entry is Applied (none Pending from an
	// interrupted apply, none Stale from a failed prune).
	Complete bool
	// Drifted names (Kind/namespace/name) the applied objects whose live
	// state no longer matches the last apply: deleted, a field flotilla
	// applied changed by another manager, or ownership labels lost. Objects
	// whose live copy is annotated flotilla.dev/reconcile=disabled are not
	// drift.
	Drifted []string
	// ManagedObjects counts the Applied entries.
	ManagedObjects int
	// HooksPending: the unit's post hooks at Hash have not run yet, or a
	// hook failed at Hash (an Apply reports it again).
	HooksPending bool

	inv *Inventory
}

// UpToDate reports whether an Apply of a unit with this hash and prune flag
// would make no write: same hash and prune flag, a complete inventory and
// no drift. The caller may then skip rendering the unit.
func (c *UnitCheck) UpToDate(hash string, prune bool) bool {
	return c.inv.appliedAt(hash, prune) && c.Complete && len(c.Drifted) == 0 && !c.HooksPending
}

// Check compares a unit's inventory with the live objects' metadata, using
// obs (from Observe) where it covers them and one metadata-only GET per
// object otherwise. It makes no write and needs no rendered objects, so an
// agent can skip rendering a unit whose content hash is unchanged and that
// did not drift. An entry applied without a fingerprint cannot be checked
// and counts as drifted (Apply then decides).
func (a *Applier) Check(ctx context.Context, unit string, obs *Observation) (*UnitCheck, error) {
	if err := validateUnitName(unit); err != nil {
		return nil, err
	}
	defer a.lockUnit(unit)()
	inv, err := a.loadInventory(ctx, unit)
	if err != nil {
		return nil, err
	}
	c := &UnitCheck{Unit: unit, Complete: true, inv: inv}
	if inv.resourceVersion == "" {
		c.Complete = false
		return c, nil
	}
	c.Exists, c.Hash, c.Prune, c.Revision = true, inv.Hash, inv.Prune, inv.Revision
	c.HooksPending = inv.Hooks.pending(inv.Hash)
	obs = obs.forUnit(inv)

	var entries []Entry
	for _, e := range inv.Entries {
		if e.State != Applied {
			c.Complete = false
			continue
		}
		c.ManagedObjects++
		entries = append(entries, e)
	}
	qs := make([]liveQuery, len(entries))
	for i, e := range entries {
		qs[i] = liveQuery{gvk: e.GroupVersionKind(), id: e.ID, observed: true}
		if e.Fingerprint == "" {
			qs[i].known = &liveMeta{} // drifted whatever is live: not read
		}
	}
	lives, _, err := a.lives(ctx, obs, qs)
	if err != nil {
		return nil, err
	}
	drifted := make([]bool, len(entries))
	for i, e := range entries {
		drifted[i] = e.Fingerprint == "" || judgeLive(lives[i], e, unit) == liveDrifted
	}
	for i, e := range entries {
		if drifted[i] {
			c.Drifted = append(c.Drifted, e.Subject())
		}
	}
	return c, nil
}
