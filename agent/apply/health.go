package apply

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

// target is an object to check, with the version to read it at.
type target struct {
	id  object.ObjMetadata
	gvk schema.GroupVersionKind
}

// finishHealth sets res.Ready: without Wait an apply that got here is
// Ready; with Wait every applied object must reach kstatus Current within
// the unit's timeout.
func (a *Applier) finishHealth(ctx context.Context, u UnitRequest, ds []*desired, res *UnitResult) error {
	if !u.Wait {
		res.Ready = true
		return nil
	}
	skipped := map[object.ObjMetadata]bool{}
	for _, c := range res.ChangeSet {
		if c.Action == ssa.SkippedAction {
			skipped[c.ObjMetadata] = true
		}
	}
	var targets []target
	for _, d := range ds {
		if !skipped[d.id] {
			targets = append(targets, target{id: d.id, gvk: d.obj.GroupVersionKind()})
		}
	}
	stop := a.reportWaiting(ctx, targets, u.Waiting)
	ready, notReady, err := a.waitReady(ctx, targets, a.timeout(u.Timeout))
	stop()
	res.Ready, res.NotReady = ready, notReady
	return err
}

// waitReady polls kstatus (ssa.WaitForSetWithContext) until every target
// is Current, one fails, or timeout; then names the objects not Ready.
func (a *Applier) waitReady(ctx context.Context, targets []target, timeout time.Duration) (bool, []string, error) {
	if len(targets) == 0 {
		return true, nil, nil
	}
	ids := make(object.ObjMetadataSet, len(targets))
	for i, t := range targets {
		ids[i] = t.id
	}
	start := time.Now()
	werr := a.rm.WaitForSetWithContext(ctx, ids, ssa.WaitOptions{Interval: a.opts.PollInterval, Timeout: timeout, FailFast: true})
	if werr == nil {
		return true, nil, nil
	}
	if ctx.Err() != nil {
		return false, nil, ctx.Err()
	}
	notReady, failed, err := a.statuses(ctx, targets)
	if err != nil {
		return false, nil, fmt.Errorf("%w: %w", ErrHealthTimeout, err)
	}
	if len(notReady) == 0 {
		return true, nil, nil
	}
	class := ErrHealthTimeout
	if failed {
		class = ErrHealthFailed
	}
	shown := notReady
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(notReady)-5))
	}
	return false, notReady, fmt.Errorf("%w: %d of %s not ready after %s: %s",
		class, len(notReady), plural.Count(len(targets), "object", "objects"), time.Since(start).Round(time.Second), strings.Join(shown, "; "))
}

// reportWaiting tells report, every Options.WaitReport until the returned
// stop is called, which targets are not yet kstatus Current. ssa's wait
// says nothing until it ends; a wait of minutes must say what it waits for
// while it waits. stop returns once no report is in flight.
func (a *Applier) reportWaiting(ctx context.Context, targets []target, report func([]string)) (stop func()) {
	if report == nil || len(targets) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(a.opts.WaitReport)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			notReady, _, err := a.statuses(ctx, targets)
			if err == nil && len(notReady) > 0 && ctx.Err() == nil {
				report(notReady)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// statuses computes each target's kstatus once, returning the ones not
// Current as "Kind/namespace/name: Status: message".
func (a *Applier) statuses(ctx context.Context, targets []target) (notReady []string, failed bool, err error) {
	results := make([]string, len(targets))
	failures := make([]bool, len(targets))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(a.opts.Concurrency)
	for i, t := range targets {
		g.Go(func() error {
			rctx, cancel := a.reqCtx(gctx)
			defer cancel()
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(t.gvk)
			subj := subject(t.id.GroupKind.Kind, t.id.Namespace, t.id.Name)
			err := a.client.Get(rctx, client.ObjectKey{Namespace: t.id.Namespace, Name: t.id.Name}, u)
			if apierrors.IsNotFound(err) {
				results[i] = subj + ": " + string(status.NotFoundStatus)
				return nil
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", subj, err)
			}
			st, err := status.Compute(u)
			if err != nil {
				results[i] = subj + ": " + string(status.UnknownStatus) + ": " + err.Error()
				return nil
			}
			if st.Status != status.CurrentStatus {
				results[i] = subj + ": " + string(st.Status)
				if st.Message != "" {
					results[i] += ": " + st.Message
				}
				failures[i] = st.Status == status.FailedStatus
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	for i, r := range results {
		if r != "" {
			notReady = append(notReady, r)
			failed = failed || failures[i]
		}
	}
	return notReady, failed, nil
}

// CheckReady reports whether every object the unit last applied is kstatus
// Current now (one read per object, no waiting), naming those that are
// not. It serves dependsOn. ErrNoInventory when the unit was never applied.
func (a *Applier) CheckReady(ctx context.Context, unit string) (bool, []string, error) {
	if err := validateUnitName(unit); err != nil {
		return false, nil, err
	}
	inv, err := a.loadInventory(ctx, unit)
	if err != nil {
		return false, nil, err
	}
	if inv.resourceVersion == "" {
		return false, nil, fmt.Errorf("unit %s: %w", unit, ErrNoInventory)
	}
	var targets []target
	for _, e := range inv.Entries {
		if e.State == Applied {
			targets = append(targets, target{id: e.ID, gvk: e.GroupVersionKind()})
		}
	}
	notReady, _, err := a.statuses(ctx, targets)
	if err != nil {
		return false, nil, fmt.Errorf("unit %s: %w", unit, err)
	}
	return len(notReady) == 0, notReady, nil
}
