package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/agent/apply"
)

// staticOwners is the desired state of the revision being applied, as the
// agent's slice would say it: which unit renders which objects.
type staticOwners map[string][]object.ObjMetadata

func (o staticOwners) Claims(_ context.Context, unit string, id object.ObjMetadata) (bool, error) {
	for _, x := range o[unit] {
		if x == id {
			return true, nil
		}
	}
	return false, nil
}

func (o staticOwners) ClaimedBy(ctx context.Context, unit string, id object.ObjMetadata) (string, error) {
	for name := range o {
		if c, _ := o.Claims(ctx, name, id); c && name != unit {
			return name, nil
		}
	}
	return "", nil
}

func configMap(ns, name, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, value, "data", "v")
	return u
}

func cmID(ns, name string) object.ObjMetadata {
	return object.ObjMetadata{Namespace: ns, Name: name, GroupKind: configMap(ns, name, "").GroupVersionKind().GroupKind()}
}

// live returns an object's owning unit, uid and data.
func (f *fixture) owner(ns, name string) (unit, uid, value string) {
	f.t.Helper()
	o := f.get("v1", "ConfigMap", ns, name)
	v, _, _ := unstructured.NestedString(o.Object, "data", "v")
	return o.GetLabels()[apply.LabelUnit], string(o.GetUID()), v
}

// An object another unit owns and still claims is not taken over: the
// unit reports ErrConflict naming the object and its owner, and the rest
// of the unit is applied. Applying again changes nothing (no flapping).
func TestConflictIsNotTakenOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "own-conflict")
	ns := "own-conflict"
	if err := f.c.CreateNamespace(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	f.apply(apply.UnitRequest{Name: "one", Hash: "1", Objects: []*unstructured.Unstructured{configMap(ns, "shared", "one")}, Prune: true})
	_, uid, _ := f.owner(ns, "shared")

	for _, owners := range []apply.Owners{nil, staticOwners{"one": {cmID(ns, "shared")}, "two": {cmID(ns, "shared"), cmID(ns, "own")}}} {
		for range 2 {
			res, err := f.a.Apply(ctx(t), apply.UnitRequest{Name: "two", Hash: "1", Prune: true, Owners: owners,
				Objects: []*unstructured.Unstructured{configMap(ns, "shared", "two"), configMap(ns, "own", "two")}})
			if !errors.Is(err, apply.ErrConflict) {
				t.Fatalf("apply two (owners %v): err = %v, want ErrConflict", owners, err)
			}
			if !strings.Contains(err.Error(), "ConfigMap/own-conflict/shared") || !strings.Contains(err.Error(), "unit one") {
				t.Errorf("error %q does not name the object and its owner", err)
			}
			if got := subjects(res.Conflicts); got != "ConfigMap/own-conflict/shared belongs to unit one" {
				t.Errorf("conflicts = %q", got)
			}
			if unit, gotUID, v := f.owner(ns, "shared"); unit != "one" || gotUID != uid || v != "one" {
				t.Fatalf("shared is now unit %s uid %s data %s; want unit one's, untouched", unit, gotUID, v)
			}
			if unit, _, _ := f.owner(ns, "own"); unit != "two" {
				t.Fatalf("the rest of unit two was not applied: own belongs to %q", unit)
			}
		}
	}
	// Unit two's inventory does not own the object it did not take: its
	// removal leaves it to unit one.
	if _, err := f.a.Delete(ctx(t), "two"); err != nil {
		t.Fatal(err)
	}
	if unit, gotUID, _ := f.owner(ns, "shared"); unit != "one" || gotUID != uid {
		t.Fatalf("after deleting unit two, shared is unit %s uid %s", unit, gotUID)
	}
}

// Moving an object between two units in one revision hands it over
// without a delete, whichever unit is applied first, and so does removing
// the old unit altogether.
func TestMoveBetweenUnits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "own-move")
	tests := []struct {
		name string
		// oldFirst applies the unit that gives the object up first.
		oldFirst bool
		// removed: the old unit leaves the desired state (DeleteUnit).
		removed bool
	}{
		{name: "old-first", oldFirst: true},
		{name: "new-first"},
		{name: "old-removed", removed: true},
	}
	for i, tt := range tests {
		ns := fmt.Sprintf("own-move-%d", i)
		if err := f.c.CreateNamespace(ctx(t), ns); err != nil {
			t.Fatal(err)
		}
		from, to := "from-"+tt.name, "to-"+tt.name
		keep := configMap(ns, "keep", "a")
		f.apply(apply.UnitRequest{Name: from, Hash: "1", Prune: true, Objects: []*unstructured.Unstructured{configMap(ns, "moved", "a"), keep}})
		_, uid, _ := f.owner(ns, "moved")

		// At the new revision only unit "to" renders the object.
		owners := staticOwners{to: {cmID(ns, "moved")}}
		if !tt.removed {
			owners[from] = []object.ObjMetadata{cmID(ns, "keep")}
		}
		applyOld := func() {
			if tt.removed {
				res, err := f.a.DeleteUnit(ctx(t), from, owners)
				if err != nil {
					t.Fatalf("%s: delete %s: %v", tt.name, from, err)
				}
				if got := subjects(res.HandedOver); got != "ConfigMap/"+ns+"/moved to unit "+to {
					t.Errorf("%s: handed over %q", tt.name, got)
				}
				return
			}
			res, err := f.a.Apply(ctx(t), apply.UnitRequest{Name: from, Hash: "2", Prune: true, Owners: owners, Objects: []*unstructured.Unstructured{keep}})
			if err != nil {
				t.Fatalf("%s: apply %s: %v", tt.name, from, err)
			}
			if len(res.Pruned) != 0 {
				t.Errorf("%s: pruned %v", tt.name, res.Pruned)
			}
		}
		applyNew := func() {
			res, err := f.a.Apply(ctx(t), apply.UnitRequest{Name: to, Hash: "1", Prune: true, Owners: owners, Objects: []*unstructured.Unstructured{configMap(ns, "moved", "b")}})
			if err != nil {
				t.Fatalf("%s: apply %s: %v", tt.name, to, err)
			}
			if got := subjects(res.TakenOver); got != "ConfigMap/"+ns+"/moved from unit "+from {
				t.Errorf("%s: taken over %q", tt.name, got)
			}
		}
		if tt.oldFirst || tt.removed {
			applyOld()
			if unit, gotUID, _ := f.owner(ns, "moved"); gotUID != uid || unit != from {
				t.Fatalf("%s: after the old unit's apply: unit %s uid %s, want %s %s", tt.name, unit, gotUID, from, uid)
			}
			applyNew()
		} else {
			applyNew()
			applyOld()
		}
		if unit, gotUID, v := f.owner(ns, "moved"); unit != to || gotUID != uid || v != "b" {
			t.Fatalf("%s: moved is unit %s uid %s data %s; want unit %s, uid %s (never deleted), data b", tt.name, unit, gotUID, v, to, uid)
		}
		if !tt.removed {
			inv, err := f.a.Inventory(ctx(t), from)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range inv.Entries {
				if e.ID.Name == "moved" {
					t.Errorf("%s: unit %s still lists the moved object", tt.name, from)
				}
			}
		}
	}
}

// unknownOwners cannot tell who renders anything (a unit of the slice
// fails to render).
type unknownOwners struct{}

func (unknownOwners) Claims(context.Context, string, object.ObjMetadata) (bool, error) {
	return true, errors.New("unit broken does not render")
}

func (unknownOwners) ClaimedBy(context.Context, string, object.ObjMetadata) (string, error) {
	return "", errors.New("unit broken does not render")
}

// A stale object whose new owner cannot be told is neither pruned nor
// released: the apply reports ErrPrune, the rest is applied, and the next
// apply asks again.
func TestStaleObjectOfUnknownOwnerIsHeld(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "own-held")
	ns := "own-held"
	if err := f.c.CreateNamespace(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	f.apply(apply.UnitRequest{Name: "web", Hash: "1", Prune: true, Objects: []*unstructured.Unstructured{configMap(ns, "old", "a"), configMap(ns, "keep", "a")}})
	_, uid, _ := f.owner(ns, "old")
	for range 2 {
		res, err := f.a.Apply(ctx(t), apply.UnitRequest{Name: "web", Hash: "2", Prune: true, Owners: unknownOwners{},
			Objects: []*unstructured.Unstructured{configMap(ns, "keep", "b")}})
		if !errors.Is(err, apply.ErrPrune) || !strings.Contains(err.Error(), "ConfigMap/own-held/old kept") {
			t.Fatalf("err = %v, want ErrPrune naming the held object", err)
		}
		if len(res.Pruned) != 0 || subjects(res.PruneKept) != "ConfigMap/own-held/old" {
			t.Errorf("pruned %v, kept %v", res.Pruned, res.PruneKept)
		}
		if _, gotUID, _ := f.owner(ns, "old"); gotUID != uid {
			t.Fatalf("old was re-created")
		}
		if _, _, v := f.owner(ns, "keep"); v != "b" {
			t.Errorf("the rest of the unit was not applied: keep = %q", v)
		}
	}
	// Once the owners are known again (nobody renders it), it is pruned.
	res := f.apply(apply.UnitRequest{Name: "web", Hash: "2", Prune: true, Owners: staticOwners{}, Objects: []*unstructured.Unstructured{configMap(ns, "keep", "b")}})
	if subjects(res.Pruned) != "ConfigMap/own-held/old" {
		t.Errorf("pruned %v, want the held object", res.Pruned)
	}
}
