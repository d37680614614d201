package apply

// What Apply must write: the per-object decision against the inventory
// and the live metadata.

import (
	"context"

	"github.com/fluxcd/pkg/ssa"
)

// plan decides, per rendered object, whether it must be applied. An
// object whose content is unchanged is checked against its live metadata
// and is applied again only when it drifted.
func (a *Applier) plan(ctx context.Context, u UnitRequest, ds []*desired, prev *Inventory, res *UnitResult) ([]*work, []*work, error) {
	prevEntries := prev.entryMap()
	hashSame := u.Hash != "" && u.Hash == prev.Hash
	works := make([]*work, len(ds))
	var check []*work
	for i, d := range ds {
		w := &work{d: d}
		if pe, ok := prevEntries[d.id]; ok {
			w.prev = &pe
		}
		works[i] = w
		if d.gitDisabled {
			continue
		}
		if w.prev == nil || w.prev.State != Applied || w.prev.Version != d.version || u.Force {
			continue
		}
		if u.CreateOnly {
			w.entry = w.prev
			continue
		}
		if w.prev.Fingerprint != "" && (hashSame || (d.contentHash != "" && d.contentHash == w.prev.ContentHash)) {
			check = append(check, w)
		}
	}

	obs := u.Observed.forUnit(prev)
	qs := make([]liveQuery, len(check))
	for i, w := range check {
		qs[i] = liveQuery{gvk: w.d.obj.GroupVersionKind(), id: w.d.id, observed: true}
	}
	lives, _, err := a.lives(ctx, obs, qs)
	if err != nil {
		return nil, nil, err
	}
	checked := make(map[*work]liveMeta, len(check))
	for i, w := range check {
		checked[w] = lives[i]
	}

	var toApply []*work
	for _, w := range works {
		d := w.d
		if d.gitDisabled {
			res.Disabled++
			res.ChangeSet = append(res.ChangeSet, changeEntry(d, ssa.SkippedAction))
			continue
		}
		if w.entry != nil { // CreateOnly, already created
			res.Unchanged++
			res.ChangeSet = append(res.ChangeSet, changeEntry(d, ssa.UnchangedAction))
			continue
		}
		live, wasChecked := checked[w]
		if !wasChecked {
			toApply = append(toApply, w)
			continue
		}
		switch judgeLive(live, *w.prev, u.Name) {
		case liveDisabled:
			res.Disabled++
			res.ChangeSet = append(res.ChangeSet, changeEntry(d, ssa.SkippedAction))
		case liveUnchanged:
			w.entry = w.prev
			res.Unchanged++
			res.ChangeSet = append(res.ChangeSet, changeEntry(d, ssa.UnchangedAction))
		default:
			w.drift = true
			w.live = &live
			toApply = append(toApply, w)
		}
	}
	return works, toApply, nil
}

// withPending returns prev plus Pending entries for the objects about to
// be applied that it does not list, or nil when there are none.
func withPending(prev *Inventory, toApply []*work) *Inventory {
	var add []Entry
	for _, w := range toApply {
		if w.prev == nil {
			add = append(add, Entry{ID: w.d.id, Version: w.d.version, State: Pending})
		}
	}
	if len(add) == 0 {
		return nil
	}
	next := prev.clone()
	next.Entries = append(next.Entries, add...)
	sortEntries(next.Entries)
	return next
}

func sameInventory(a, b *Inventory) bool {
	if a.resourceVersion == "" || a.Hash != b.Hash || a.Prune != b.Prune || a.Cluster != b.Cluster || a.Hooks != b.Hooks || len(a.Entries) != len(b.Entries) {
		return false
	}
	for i := range a.Entries {
		if a.Entries[i] != b.Entries[i] {
			return false
		}
	}
	return true
}

func changeEntry(d *desired, action ssa.Action) ssa.ChangeSetEntry {
	return ssa.ChangeSetEntry{ObjMetadata: d.id, GroupVersion: d.obj.GetAPIVersion(), Subject: d.subject(), Action: action}
}
