package apply

import (
	"context"
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/object"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Observation is a snapshot of the metadata of every object flotilla
// manages, read with one paginated, metadata-only List per kind. Passing it
// in UnitRequest.Observed lets a pass over many unchanged units check drift
// without a read per object. A unit whose inventory was written after the
// snapshot began falls back to per-object reads, so a stale snapshot never
// hides drift; it can only cost an extra read.
type Observation struct {
	seq     uint64
	listed  map[schema.GroupKind]bool
	objects map[object.ObjMetadata]liveMeta
}

// Len is the number of objects observed.
func (o *Observation) Len() int { return len(o.objects) }

// observePageSize bounds each List response (and the memory it needs).
const observePageSize = 500

// Observe lists the kinds found in the inventories (reading all of them
// first, as Units does).
func (a *Applier) Observe(ctx context.Context) (*Observation, error) {
	obs := &Observation{
		seq:     a.seq.Load(),
		listed:  map[schema.GroupKind]bool{},
		objects: map[object.ObjMetadata]liveMeta{},
	}
	if _, err := a.Units(ctx); err != nil {
		return nil, err
	}
	kinds := map[schema.GroupKind]schema.GroupVersionKind{}
	a.mu.Lock()
	for _, inv := range a.inventories {
		for _, e := range inv.Entries {
			if _, ok := kinds[e.ID.GroupKind]; !ok {
				kinds[e.ID.GroupKind] = e.GroupVersionKind()
			}
		}
	}
	a.mu.Unlock()
	for gk, gvk := range kinds {
		if err := a.observeKind(ctx, gvk, obs); err != nil {
			return nil, err
		}
		obs.listed[gk] = true
	}
	return obs, nil
}

func (a *Applier) observeKind(ctx context.Context, gvk schema.GroupVersionKind, obs *Observation) error {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	opts := []client.ListOption{client.MatchingLabels{LabelManagedBy: ManagedByValue}, client.Limit(observePageSize)}
	for {
		rctx, cancel := a.reqCtx(ctx)
		err := a.client.List(rctx, list, opts...)
		cancel()
		if err != nil {
			return fmt.Errorf("observe %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			m := &list.Items[i]
			id := object.ObjMetadata{Namespace: m.Namespace, Name: m.Name, GroupKind: gvk.GroupKind()}
			obs.objects[id] = a.liveFromMeta(m)
		}
		if list.Continue == "" {
			return nil
		}
		opts = append(opts[:2], client.Continue(list.Continue))
	}
}

// forUnit returns o when it is at least as new as the unit's last
// inventory write by this Applier.
func (o *Observation) forUnit(inv *Inventory) *Observation {
	if o == nil || inv.writeSeq > o.seq {
		return nil
	}
	return o
}

// lookup returns the observed metadata of id; ok is false when id's kind
// was not listed (the caller must read it). An object of a listed kind that
// is absent does not exist or lost the managed-by label: drift either way.
func (o *Observation) lookup(id object.ObjMetadata) (liveMeta, bool) {
	if !o.listed[id.GroupKind] {
		return liveMeta{}, false
	}
	return o.objects[id], true
}
