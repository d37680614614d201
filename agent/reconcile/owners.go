package reconcile

import (
	"context"
	"fmt"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// sliceOwners answers agent/apply's ownership questions (apply.Owners) from
// data fixed before any unit applies: the slice of the cycle's revision,
// the units' inventories as the cycle found them, and the units' renders at
// the revision. A unit claims an object when it is in the slice and renders
// the object at this revision: for a unit whose inventory was complete at
// the slice's hash, what the inventory lists; otherwise what rendering the
// unit gives (once per cycle, only when asked). A unit gone from the slice
// claims nothing. So an object moved from unit A to unit B in one commit is
// handed over without a delete in either order: applied first, B takes it
// because A no longer renders it; applied first, A releases it because B
// renders it. Answering reads nothing from the cluster, so a unit's apply
// never calls back into the applier while it holds the unit's lock.
type sliceOwners struct {
	rc          *cycleRun
	units       map[string]slice.Unit
	order       []string
	inventories map[string]claimedInventory

	mu   sync.Mutex
	sets map[string]*claimSet
}

// claimedInventory is what a unit's inventory owned when the cycle began.
type claimedInventory struct {
	hash     string
	ids      []object.ObjMetadata
	complete bool
}

type claimSet struct {
	once sync.Once
	ids  map[object.ObjMetadata]bool
	// cluster-scoped objects are also matched by kind and name alone: a
	// render may carry a namespace the apply drops.
	byName map[schema.GroupKind]map[string]bool
	err    error
}

var _ apply.Owners = (*sliceOwners)(nil)

// newSliceOwners reads the inventories of the slice's units (from the
// applier's cache once Observe listed them).
func newSliceOwners(ctx context.Context, l *Loop, rc *cycleRun) *sliceOwners {
	o := &sliceOwners{rc: rc, units: map[string]slice.Unit{}, inventories: map[string]claimedInventory{}, sets: map[string]*claimSet{}}
	if rc.rev == nil || rc.rev.slice == nil {
		return o
	}
	for _, u := range rc.rev.slice.Units {
		o.units[u.Name] = u
		o.order = append(o.order, u.Name)
		hash, ids, complete, err := l.cfg.Applier.ClaimedObjects(ctx, u.Name)
		if err == nil {
			// An unreadable inventory is left out: the unit's render answers.
			o.inventories[u.Name] = claimedInventory{hash: hash, ids: ids, complete: complete}
		}
	}
	return o
}

// Claims implements apply.Owners.
func (o *sliceOwners) Claims(ctx context.Context, unit string, id object.ObjMetadata) (bool, error) {
	u, ok := o.units[unit]
	if !ok {
		return false, nil
	}
	s := o.set(unit)
	s.once.Do(func() { o.fill(ctx, u, s) })
	if s.err != nil {
		return true, s.err
	}
	return s.ids[id] || (id.Namespace == "" && s.byName[id.GroupKind][id.Name]), nil
}

// ClaimedBy implements apply.Owners. A unit whose claims cannot be told
// (it does not render) makes the answer an error unless another unit
// claims the object.
func (o *sliceOwners) ClaimedBy(ctx context.Context, unit string, id object.ObjMetadata) (string, error) {
	var unknown error
	for _, name := range o.order {
		if name == unit {
			continue
		}
		claimed, err := o.Claims(ctx, name, id)
		switch {
		case err != nil:
			if unknown == nil {
				unknown = fmt.Errorf("unit %s: %w", name, err)
			}
		case claimed:
			return name, nil
		}
	}
	return "", unknown
}

func (o *sliceOwners) set(unit string) *claimSet {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.sets[unit]
	if s == nil {
		s = &claimSet{}
		o.sets[unit] = s
	}
	return s
}

func (o *sliceOwners) fill(ctx context.Context, u slice.Unit, s *claimSet) {
	s.ids = map[object.ObjMetadata]bool{}
	s.byName = map[schema.GroupKind]map[string]bool{}
	add := func(id object.ObjMetadata) {
		s.ids[id] = true
		if s.byName[id.GroupKind] == nil {
			s.byName[id.GroupKind] = map[string]bool{}
		}
		s.byName[id.GroupKind][id.Name] = true
	}
	if inv, ok := o.inventories[u.Name]; ok && inv.complete && inv.hash == u.Hash {
		for _, id := range inv.ids {
			add(id)
		}
		return
	}
	dir := o.rc.rev.res.Dir
	if err := slice.CheckHash(o.rc.hasher(dir), u); err != nil {
		s.err = err
		return
	}
	// Object ids are all that is needed: Secrets stay encrypted.
	opts := o.rc.renderOpts
	opts.Decryptor = nil
	out, err := render.Unit(ctx, dir, u, opts)
	if err != nil {
		s.err = err
		return
	}
	for _, obj := range out.Objects {
		add(object.UnstructuredToObjMetadata(obj))
	}
}
