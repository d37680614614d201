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

	"github.com/flotilla-gitops/flotilla/pkg/health"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

// target is an object to check, with the version to read it at.
type target struct {
	id  object.ObjMetadata
	gvk schema.GroupVersionKind
}

// HealthOptions say how a unit's health is judged while it is waited for.
type HealthOptions struct {
	// Checks judge the kinds they name (CEL, as Flux's healthCheckExprs);
	// kstatus judges the rest. Nil: kstatus only.
	Checks *health.Checks
	// WaitForTimeout: an object reported Failed does not end the wait, for
	// kinds that recover on their own; the wait goes on until the timeout.
	// Otherwise a Failed object fails the unit at once (ErrHealthFailed).
	WaitForTimeout bool
	// Interrupt, when it closes, ends the wait at once with
	// ErrWaitInterrupted: a newer revision supersedes what is waited for.
	Interrupt <-chan struct{}
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
	ready, notReady, err := a.waitReady(ctx, targets, a.timeout(u.Timeout), u.Health, u.Waiting)
	res.Ready, res.NotReady = ready, notReady
	return err
}

// WaitReady waits until every object the unit last applied is Ready, one
// is Failed (unless WaitForTimeout), h.Interrupt closes or timeout
// passes, telling waiting (when set) what it waits for every
// Options.WaitReport. It serves units found unchanged but not Ready yet.
// ErrNoInventory when the unit was never applied.
func (a *Applier) WaitReady(ctx context.Context, unit string, timeout time.Duration, h HealthOptions, waiting func([]string)) (bool, []string, error) {
	targets, err := a.appliedTargets(ctx, unit)
	if err != nil {
		return false, nil, err
	}
	ready, notReady, err := a.waitReady(ctx, targets, timeout, h, waiting)
	if err != nil {
		return ready, notReady, failureOf(fmt.Errorf("unit %s: %w", unit, err))
	}
	return ready, notReady, nil
}

// waitReady polls health (ssa.WaitForSetWithContext, with the checks'
// status readers) until every target is Current, one fails (unless
// WaitForTimeout), h.Interrupt closes or timeout; then names the objects
// not Ready.
func (a *Applier) waitReady(ctx context.Context, targets []target, timeout time.Duration, h HealthOptions, waiting func([]string)) (bool, []string, error) {
	if len(targets) == 0 {
		return true, nil, nil
	}
	ids := make(object.ObjMetadataSet, len(targets))
	for i, t := range targets {
		ids[i] = t.id
	}
	rm := a.rm
	if h.Checks != nil {
		rm = ssa.NewResourceManager(a.client, a.poller(h.Checks), ssa.Owner{Field: a.opts.FieldManager, Group: "flotilla.dev"})
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if h.Interrupt != nil {
		go func() {
			select {
			case <-h.Interrupt:
				cancel(ErrWaitInterrupted)
			case <-wctx.Done():
			}
		}()
	}
	stop := a.reportWaiting(wctx, targets, h.Checks, waiting)
	defer stop()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		werr := rm.WaitForSetWithContext(wctx, ids, ssa.WaitOptions{Interval: a.opts.PollInterval, Timeout: time.Until(deadline), FailFast: !h.WaitForTimeout})
		if werr == nil {
			return true, nil, nil
		}
		if ctx.Err() != nil {
			return false, nil, ctx.Err()
		}
		if wctx.Err() != nil {
			notReady, _, _ := a.statuses(ctx, targets, h.Checks)
			return false, notReady, fmt.Errorf("%w after %s: %s", ErrWaitInterrupted, time.Since(start).Round(time.Second), summary(notReady, len(targets)))
		}
		// ssa's wait also ends when every object is Current or Failed;
		// with WaitForTimeout a Failed object is waited for until the
		// deadline, as it may recover.
		if !h.WaitForTimeout || time.Until(deadline) <= a.opts.PollInterval {
			break
		}
		t := time.NewTimer(a.opts.PollInterval)
		select {
		case <-wctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	notReady, failed, err := a.statuses(ctx, targets, h.Checks)
	if err != nil {
		return false, nil, fmt.Errorf("%w: %w", ErrHealthTimeout, err)
	}
	if len(notReady) == 0 {
		return true, nil, nil
	}
	if failed && !h.WaitForTimeout {
		return false, notReady, fmt.Errorf("%w: %s", ErrHealthFailed, summary(notReady, len(targets)))
	}
	return false, notReady, fmt.Errorf("%w: %d of %s not ready after %s: %s",
		ErrHealthTimeout, len(notReady), plural.Count(len(targets), "object", "objects"), time.Since(start).Round(time.Second), Summarize(notReady))
}

// summary says which of total objects are not ready, the first few by name.
func summary(notReady []string, total int) string {
	return fmt.Sprintf("%d of %s not ready: %s", len(notReady), plural.Count(total, "object", "objects"), Summarize(notReady))
}

// Summarize names at most five items, then how many more, for messages
// ("a; b; c; d; e; and 2 more").
func Summarize(items []string) string {
	const shown = 5
	if len(items) <= shown {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:shown], "; ") + fmt.Sprintf("; and %d more", len(items)-shown)
}

// reportWaiting tells report, every Options.WaitReport until the returned
// stop is called, which targets are not yet kstatus Current. ssa's wait
// says nothing until it ends; a wait of minutes must say what it waits for
// while it waits. stop returns once no report is in flight.
func (a *Applier) reportWaiting(ctx context.Context, targets []target, checks *health.Checks, report func([]string)) (stop func()) {
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
			notReady, _, err := a.statuses(ctx, targets, checks)
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

// statuses computes each target's health once (its check's, else
// kstatus), returning the ones not Current as "Kind/namespace/name:
// Status: message", a Failed one with its failure condition's reason and
// message when kstatus's does not say them.
func (a *Applier) statuses(ctx context.Context, targets []target, checks *health.Checks) (notReady []string, failed bool, err error) {
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
			st, err := checks.Status(rctx, u)
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
				if failures[i] {
					results[i] += failureDetail(u, st.Message)
				}
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

// CheckReady reports whether every object the unit last applied is
// Ready now by checks (one read per object, no waiting), naming those that
// are not. ErrNoInventory when the unit was never applied.
func (a *Applier) CheckReady(ctx context.Context, unit string, checks *health.Checks) (bool, []string, error) {
	targets, err := a.appliedTargets(ctx, unit)
	if err != nil {
		return false, nil, err
	}
	notReady, _, err := a.statuses(ctx, targets, checks)
	if err != nil {
		return false, nil, fmt.Errorf("unit %s: %w", unit, err)
	}
	return len(notReady) == 0, notReady, nil
}

// appliedTargets are the objects the unit's inventory records as applied.
func (a *Applier) appliedTargets(ctx context.Context, unit string) ([]target, error) {
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
	var targets []target
	for _, e := range inv.Entries {
		if e.State == Applied {
			targets = append(targets, target{id: e.ID, gvk: e.GroupVersionKind()})
		}
	}
	return targets, nil
}

// failureDetail is the reason and message of the condition that says obj
// failed (Failed or Stalled True, Progressing or Ready False), as
// " (Reason: message)", when the kstatus message does not contain it
// already: kstatus says "Job Failed. failed: 1/1", the Job says why.
func failureDetail(obj *unstructured.Unstructured, said string) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, want := range [...]struct{ typ, status string }{
		{"Failed", "True"}, {"Stalled", "True"}, {"Progressing", "False"}, {"Ready", "False"},
	} {
		for _, c := range conds {
			m, _ := c.(map[string]any)
			typ, _ := m["type"].(string)
			st, _ := m["status"].(string)
			if typ != want.typ || st != want.status {
				continue
			}
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			detail := strings.TrimPrefix(strings.TrimSpace(reason+": "+msg), ": ")
			if detail == "" || detail == ":" || strings.Contains(said, msg) && strings.Contains(said, reason) {
				return ""
			}
			return " (" + strings.TrimSuffix(detail, ":") + ")"
		}
	}
	return ""
}
