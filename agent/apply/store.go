package apply

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// loadInventory returns the unit's inventory from the cache or the
// cluster; a unit never applied gets an empty, unstored inventory.
func (a *Applier) loadInventory(ctx context.Context, unit string) (*Inventory, error) {
	a.mu.Lock()
	inv, ok := a.inventories[unit]
	listed := a.listed
	a.mu.Unlock()
	if ok {
		return inv, nil
	}
	if listed {
		return &Inventory{Unit: unit, Cluster: a.opts.Cluster}, nil
	}
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	cm := &corev1.ConfigMap{}
	err := a.client.Get(rctx, client.ObjectKey{Namespace: a.opts.InventoryNamespace, Name: InventoryName(unit)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		inv = &Inventory{Unit: unit, Cluster: a.opts.Cluster}
	case err != nil:
		return nil, fmt.Errorf("%w: read %s/%s: %w", ErrInventory, a.opts.InventoryNamespace, InventoryName(unit), err)
	default:
		if inv, err = inventoryFromConfigMap(cm); err != nil {
			return nil, err
		}
		inv.Unit = unit
	}
	a.mu.Lock()
	a.inventories[unit] = inv
	a.mu.Unlock()
	return inv, nil
}

// storeInventory creates or updates the unit's ConfigMap, guarded by its
// resourceVersion; on a conflict the cache entry is dropped so the next
// call re-reads it.
func (a *Applier) storeInventory(ctx context.Context, inv *Inventory) error {
	cm, err := inv.toConfigMap(a.opts.InventoryNamespace)
	if err != nil {
		return err
	}
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	if inv.resourceVersion == "" {
		err = a.client.Create(rctx, cm, client.FieldOwner(a.opts.FieldManager))
	} else {
		err = a.client.Update(rctx, cm, client.FieldOwner(a.opts.FieldManager))
	}
	if err != nil {
		// The stored state is unknown now: read it again next time.
		a.mu.Lock()
		delete(a.inventories, inv.Unit)
		a.listed = false
		a.mu.Unlock()
		return fmt.Errorf("%w: write %s/%s: %w", ErrInventory, cm.Namespace, cm.Name, err)
	}
	inv.resourceVersion = cm.ResourceVersion
	inv.writeSeq = a.seq.Add(1)
	a.mu.Lock()
	a.inventories[inv.Unit] = inv
	a.mu.Unlock()
	return nil
}

func (a *Applier) deleteInventory(ctx context.Context, inv *Inventory) error {
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = a.opts.InventoryNamespace, InventoryName(inv.Unit)
	err := a.client.Delete(rctx, cm, client.Preconditions{ResourceVersion: &inv.resourceVersion})
	a.mu.Lock()
	delete(a.inventories, inv.Unit)
	if err != nil && !apierrors.IsNotFound(err) {
		a.listed = false
	}
	a.mu.Unlock()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: delete %s/%s: %w", ErrInventory, cm.Namespace, cm.Name, err)
	}
	return nil
}

// Inventory returns a copy of what the unit last applied, or
// ErrNoInventory.
func (a *Applier) Inventory(ctx context.Context, unit string) (*Inventory, error) {
	if err := validateUnitName(unit); err != nil {
		return nil, err
	}
	inv, err := a.loadInventory(ctx, unit)
	if err != nil {
		return nil, err
	}
	if inv.resourceVersion == "" {
		return nil, fmt.Errorf("unit %s: %w", unit, ErrNoInventory)
	}
	return inv.clone(), nil
}

// Units lists, sorted, the units that have an inventory in the cluster,
// so the caller can Delete those that left the slice. It reads every
// inventory in one List and caches them. Corrupt inventories are listed
// and reported in the error.
func (a *Applier) Units(ctx context.Context) ([]string, error) {
	var (
		units []string
		errs  []error
		list  corev1.ConfigMapList
		opts  = []client.ListOption{
			client.InNamespace(a.opts.InventoryNamespace),
			client.HasLabels{inventoryUnitLabel},
			client.Limit(250),
		}
	)
	for {
		rctx, cancel := a.reqCtx(ctx)
		err := a.client.List(rctx, &list, opts...)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w: list: %w", ErrInventory, err)
		}
		for i := range list.Items {
			cm := &list.Items[i]
			unit := cm.Labels[inventoryUnitLabel]
			if validateUnitName(unit) != nil || cm.Name != InventoryName(unit) {
				continue
			}
			units = append(units, unit)
			inv, err := inventoryFromConfigMap(cm)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			inv.Unit = unit
			a.mu.Lock()
			// A cached copy is this Applier's own, at least as new as a
			// List that may race with its writes.
			if _, ok := a.inventories[unit]; !ok {
				a.inventories[unit] = inv
			}
			a.mu.Unlock()
		}
		if list.Continue == "" {
			break
		}
		opts = append(opts[:3], client.Continue(list.Continue))
	}
	sort.Strings(units)
	if len(errs) > 0 {
		return units, errors.Join(errs...)
	}
	a.mu.Lock()
	a.listed = true
	a.mu.Unlock()
	return units, nil
}
