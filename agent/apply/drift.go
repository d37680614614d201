package apply

import (
	"context"

	"github.com/fluxcd/cli-utils/pkg/object"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The drift rule, shared by Apply (which re-applies drifted objects) and
// Check (which only reports them), so the two can never disagree.

// liveMeta is what the drift rule needs of a live object.
type liveMeta struct {
	exists, deleting, disabled bool
	// foreign: a manager Apply takes over owns fields (takeover.go).
	foreign     bool
	fingerprint string
	labels      map[string]string
}

// liveVerdict is the drift rule's answer for one applied object.
type liveVerdict int

const (
	// liveUnchanged: the live object is as flotilla last applied it.
	liveUnchanged liveVerdict = iota
	// liveDisabled: annotated flotilla.dev/reconcile=disabled; left alone,
	// and not drift.
	liveDisabled
	// liveDrifted: gone, being deleted, a field flotilla applied changed
	// by another manager, a field added by a manager Apply takes over, or
	// ownership labels lost.
	liveDrifted
)

// judgeLive applies the drift rule to the live metadata of an object the
// inventory records as applied (entry e) by unit.
func judgeLive(live liveMeta, e Entry, unit string) liveVerdict {
	switch {
	case live.exists && live.disabled:
		return liveDisabled
	case live.exists && !live.deleting && !live.foreign && live.fingerprint == e.Fingerprint && ownedBy(live.labels, unit):
		return liveUnchanged
	}
	return liveDrifted
}

func (a *Applier) liveFromMeta(m metav1.Object) liveMeta {
	return liveMeta{
		exists:      true,
		deleting:    m.GetDeletionTimestamp() != nil,
		disabled:    isDisabled(m.GetAnnotations()),
		foreign:     a.foreignFields(m.GetManagedFields()),
		fingerprint: fingerprint(m.GetManagedFields(), a.opts.FieldManager),
		labels:      m.GetLabels(),
	}
}

// readLive reads one object's metadata (labels, annotations, managed
// fields) without its spec. A kind the API server does not serve (yet)
// has no such object.
func (a *Applier) readLive(ctx context.Context, gvk schema.GroupVersionKind, id object.ObjMetadata) (liveMeta, error) {
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	err := a.client.Get(rctx, client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, m)
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return liveMeta{}, nil
	case err != nil:
		return liveMeta{}, &ObjectError{Op: "read", Group: gvk.Group, Kind: gvk.Kind, Namespace: id.Namespace, Name: id.Name, Class: ErrApply, Cause: err}
	}
	return a.liveFromMeta(m), nil
}

// liveQuery names one object whose live metadata is wanted. known, when
// set, is the answer already; observed lets the pass's observation answer.
type liveQuery struct {
	gvk      schema.GroupVersionKind
	id       object.ObjMetadata
	known    *liveMeta
	observed bool
}

// lives answers each query from what it knows, else from obs when allowed
// and obs has the object, else with one metadata read, Concurrency reads
// at a time. read[i] says whether query i was read from the API server.
func (a *Applier) lives(ctx context.Context, obs *Observation, qs []liveQuery) (lives []liveMeta, read []bool, err error) {
	lives, read = make([]liveMeta, len(qs)), make([]bool, len(qs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.opts.Concurrency)
	for i, q := range qs {
		if q.known != nil {
			lives[i] = *q.known
			continue
		}
		if q.observed && obs != nil {
			if l, ok := obs.lookup(q.id); ok {
				lives[i] = l
				continue
			}
		}
		read[i] = true
		g.Go(func() error {
			var err error
			lives[i], err = a.readLive(gctx, q.gvk, q.id)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return lives, read, nil
}
