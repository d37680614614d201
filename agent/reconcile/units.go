package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/health"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// unitState is what the loop remembers about a unit between cycles. During
// a cycle only the unit's own worker touches it.
type unitState struct {
	// hash is the content hash last applied or found up to date.
	hash            string
	ready           bool
	appliedRevision string
	objects         int
	drift           int64
	lastError       string
	conditions      []metav1.Condition
	// suspended: the slice suspends the unit (suspend.go).
	suspended bool
	// readyHash, readySince and readyHashes: see status.UnitStatus.
	readyHash   string
	readySince  *metav1.Time
	readyHashes []string
	// good is where the unit last rendered successfully, to restore drift
	// while a newer revision of it fails to render.
	good *goodSource
	// resume is a health wait a newer revision interrupted without
	// changing the unit (watch.go).
	resume *watchedWait
}

type goodSource struct {
	dir      string
	unit     slice.Unit
	revision string
}

func (l *Loop) unitState(name string) *unitState {
	l.unitsMu.Lock()
	defer l.unitsMu.Unlock()
	st := l.units[name]
	if st == nil {
		st = &unitState{}
		// The contents Ready before a restart are still where abort may
		// return (readySince is not: the bake starts over).
		if prev := l.cfg.Previous; prev != nil {
			for _, u := range prev.Units {
				if u.Name == name {
					st.readyHashes = slices.Clone(u.ReadyHashes)
				}
			}
		}
		l.units[name] = st
	}
	return st
}

// runUnits reconciles the slice's units in dependency order, at most
// Workers at a time. A unit starts once its dependencies are done; if one
// of them is not Ready it is not applied (DependencyNotReady).
func (l *Loop) runUnits(ctx context.Context, rc *cycleRun) {
	stop := l.watchRevisions(ctx, rc)
	defer stop()
	units := rc.rev.slice.Units
	index := make(map[string]int, len(units))
	for i, u := range units {
		index[u.Name] = i
	}
	// Forget units that left the slice (pruneRemoved deletes them).
	l.unitsMu.Lock()
	for name := range l.units {
		if _, ok := index[name]; !ok {
			delete(l.units, name)
		}
	}
	l.unitsMu.Unlock()

	ready := make([]bool, len(units))
	done := make([]chan struct{}, len(units))
	for i := range done {
		done[i] = make(chan struct{})
	}
	sem := make(chan struct{}, l.cfg.Workers)
	var wg sync.WaitGroup
	for i, u := range units {
		st := l.unitState(u.Name)
		wg.Go(func() {
			defer close(done[i])
			if u.Suspend {
				// Suspended: no render, apply or prune, so nothing to
				// wait for.
				ready[i] = l.suspendUnit(ctx, rc, u, st)
				return
			}
			var blocked []string
			for _, dep := range u.DependsOn {
				j, ok := index[dep]
				if !ok || j >= i {
					// slice.Validate forbids this; never wait on a later unit.
					blocked = append(blocked, dep)
					continue
				}
				<-done[j]
				if !ready[j] {
					blocked = append(blocked, dep)
				}
			}
			if len(blocked) > 0 {
				l.finishUnit(rc, u, st, outcome{
					reason: status.ReasonDependencyNotReady, message: "dependencies not ready: " + strings.Join(blocked, ", "),
					keepLastError: true, progressing: true, count: countWaiting,
					log: "unit waits for its dependencies", logAttrs: []any{"dependsOn", blocked},
				})
				return
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				l.finishUnit(rc, u, st, outcome{
					err: status.Retrying(status.ReasonProgressing, ctx.Err()), message: "cycle cancelled before the unit was reconciled",
					progressing: true, count: countWaiting,
				})
				return
			}
			var once sync.Once
			release := func() { once.Do(func() { <-sem }) }
			defer release()
			if newer, changed := rc.supersededBy(u); changed {
				l.finishUnit(rc, u, st, outcome{
					reason: status.ReasonSuperseded, message: "not applied: superseded by " + status.ShortRevision(newer.res.Revision),
					keepLastError: true, progressing: true, count: countWaiting,
				})
				return
			}
			defer l.progress.unitStarted(u.Name, time.Now())()
			ready[i] = l.finishUnit(rc, u, st, l.reconcileUnit(ctx, rc, u, st, release))
		})
	}
	wg.Wait()
}

// reconcileUnit brings one unit to its state at rc's revision and says how
// that ended. release frees the worker slot before long waits that make no
// requests of their own worth bounding.
func (l *Loop) reconcileUnit(ctx context.Context, rc *cycleRun, u slice.Unit, st *unitState, release func()) outcome {
	rev := rc.rev.res
	log := l.log.With("unit", u.Name)
	route := l.route(u)
	if route.needsVolcano {
		if err := l.cfg.Volcano.Installed(ctx); err != nil {
			return failed(err, "volcano unit not applied")
		}
	}
	chk, err := l.cfg.Applier.Check(ctx, u.Name, rc.obs)
	if err != nil {
		log.Debug("check failed; rendering the unit", "error", l.redact.Error(err))
		chk = nil
	}

	checks, err := health.Compile(u.HealthChecks)
	if err != nil {
		return failed(status.Stalling(status.ReasonApplyFailed, fmt.Errorf("unit %s: %w", u.Name, err)), "unit's health checks do not compile")
	}
	hopts := apply.HealthOptions{Checks: checks, WaitForTimeout: u.WaitForTimeout, Interrupt: rc.interrupt()}
	started := time.Now()

	// Unchanged and not drifted: nothing to render or apply.
	if chk != nil && chk.UpToDate(u.Hash, u.Prune) {
		rc.unchanged.Add(1)
		st.objects = chk.ManagedObjects
		if st.ready && st.hash == u.Hash {
			if !l.recheckReady(u, st) {
				return outcome{reason: status.ReasonSucceeded, at: foundAt}
			}
			// Read once, not polled: a unit that stopped being Ready
			// says so now and is waited for in the next cycle.
			ready, notReady, err := l.cfg.Applier.CheckReady(ctx, u.Name, checks)
			switch {
			case err == nil && ready:
				return outcome{reason: status.ReasonSucceeded, at: foundAt}
			case err != nil:
				return outcome{err: status.Retrying(status.ReasonHealthCheckFailed, err), progressing: true, at: foundAt}
			}
			return outcome{reason: status.ReasonHealthCheckFailed, message: "not ready: " + apply.Summarize(notReady), progressing: true, at: foundAt,
				log: "unit is no longer ready", logAttrs: []any{"objects", apply.Summarize(notReady)}}
		}
		release()
		if !u.Wait {
			// Without wait, an applied unit counts as Ready (as after Apply).
			return outcome{reason: status.ReasonSucceeded, at: foundAt}
		}
		timeout := waitTimeout(u, st, started)
		ready, notReady, err := l.cfg.Applier.WaitReady(ctx, u.Name, timeout, hopts, l.waiting(u.Name, rev.Revision))
		return l.healthOutcome(rc, u, st, ready, notReady, err, started.Add(timeout), foundAt)
	}
	if chk != nil && len(chk.Drifted) > 0 && chk.Hash == u.Hash {
		log.Info("drift detected", "objects", apply.Summarize(chk.Drifted))
	}

	out, err := l.renderAt(ctx, rc, u)
	if err != nil {
		return l.keepLastApplied(ctx, rc, u, st, chk, err)
	}

	if route.submitJob {
		return l.submitJob(ctx, rc, u, st, out)
	}
	log.Debug("applying unit", "revision", rev.Revision, "objects", len(out.Objects))
	req := l.request(u, rev.Revision, u.Hash, out, rc.obs)
	req.Owners = rc.owners
	req.Health = hopts
	res, err := l.cfg.Applier.Apply(ctx, req)
	if res != nil {
		st.objects = res.ManagedObjects
		l.countResult(rc, st, res)
	}
	switch {
	case err != nil && failureOf(err).Reason == status.ReasonHealthCheckFailed:
		return l.healthOutcome(rc, u, st, false, res.NotReady, err, started.Add(u.Timeout.Duration), appliedAt)
	case err != nil:
		o := failed(err, "unit failed", "revision", rev.Revision)
		// A failed post hook comes after a Ready apply.
		if failureOf(err).Reason == status.ReasonHookFailed && res != nil && res.Ready {
			o.at = appliedAt
		}
		return o
	case !res.Ready:
		return outcome{reason: status.ReasonHealthCheckFailed, message: "not ready: " + apply.Summarize(res.NotReady), progressing: true, at: appliedAt}
	case res.Skipped:
		return outcome{reason: status.ReasonSucceeded, at: appliedAt}
	}
	attrs := []any{"revision", rev.Revision, "created", res.Created, "configured", res.Configured,
		"unchanged", res.Unchanged, "pruned", len(res.Pruned), "driftCorrected", res.DriftCorrected}
	if len(res.KeptNamespaces) > 0 {
		attrs = append(attrs, "keptNamespaces", strings.Join(res.KeptNamespaces, "; "))
	}
	if len(res.TakenOver) > 0 {
		attrs = append(attrs, "takenOver", strings.Join(res.TakenOver, "; "))
	}
	if len(res.HandedOver) > 0 {
		attrs = append(attrs, "handedOver", strings.Join(res.HandedOver, "; "))
	}
	return outcome{reason: status.ReasonSucceeded, at: appliedAt, log: "unit applied", logAttrs: attrs}
}

// renderAt renders a unit at rc's revision, and only what the slice's hash
// describes: sources pushed without re-rendering were never reviewed.
func (l *Loop) renderAt(ctx context.Context, rc *cycleRun, u slice.Unit) (*render.Result, error) {
	if err := slice.CheckHash(rc.hasher(rc.rev.res.Dir), u); err != nil {
		return nil, status.Stalling(status.ReasonSourceStale, err)
	}
	rc.rendered.Add(1)
	return render.Unit(ctx, rc.rev.res.Dir, u, rc.renderOpts)
}

// keepLastApplied is the outcome of a unit whose revision does not render
// (err): the cluster keeps the unit's last applied state, and drift from it
// is corrected from the checkout the unit last rendered from.
func (l *Loop) keepLastApplied(ctx context.Context, rc *cycleRun, u slice.Unit, st *unitState, chk *apply.UnitCheck, err error) outcome {
	if chk != nil && chk.Exists && len(chk.Drifted) > 0 {
		l.restoreDrift(ctx, rc, u, st, chk.Hash)
	}
	return failed(err, "unit not rendered; it keeps its last applied state", "revision", rc.rev.res.Revision)
}

// restoreDrift re-applies a unit from its last good checkout when that
// rendered the content (hash) the cluster has.
func (l *Loop) restoreDrift(ctx context.Context, rc *cycleRun, u slice.Unit, st *unitState, hash string) {
	g := st.good
	if g == nil || g.unit.Hash != hash || !dirExists(g.dir) {
		return
	}
	// The good checkout may be one the unit was only found up to date at.
	if err := slice.CheckHash(slice.NewTreeHasher(g.dir), g.unit); err != nil {
		l.log.Warn("drifted objects not restored: the last good checkout does not match its slice", "unit", u.Name, "revision", g.revision, "error", l.redact.Error(err))
		return
	}
	out, err := render.Unit(ctx, g.dir, g.unit, rc.renderOpts)
	if err != nil {
		return
	}
	res, err := l.cfg.Applier.Apply(ctx, l.request(g.unit, g.revision, g.unit.Hash, out, rc.obs))
	if res != nil {
		l.countResult(rc, st, res)
	}
	if err != nil {
		l.log.Warn("restoring drifted objects from the last good revision failed", "unit", u.Name, "revision", g.revision, "error", l.redact.Error(err))
		return
	}
	l.log.Info("drifted objects restored from the last good revision", "unit", u.Name, "revision", g.revision, "driftCorrected", res.DriftCorrected)
}

func (l *Loop) request(u slice.Unit, revision, hash string, out *render.Result, obs *apply.Observation) apply.UnitRequest {
	return apply.UnitRequest{
		Name:       u.Name,
		Revision:   revision,
		Hash:       hash,
		Objects:    out.Objects,
		Prune:      u.Prune,
		AllowEmpty: u.AllowEmpty,
		Wait:       u.Wait,
		Timeout:    u.Timeout.Duration,
		// Volcano jobs are created, never re-applied (their specs are
		// immutable; a completed job is not re-run).
		CreateOnly: isVolcanoJob(u),
		Observed:   obs,
		Hooks:      hooks(out.Hooks),
		Waiting:    l.waiting(u.Name, revision),
	}
}

// waiting is told what a unit waits for while it waits: it is logged, and
// the next heartbeat carries it as the unit's Reconciling condition.
func (l *Loop) waiting(unit, revision string) func(notReady []string) {
	return func(notReady []string) {
		l.progress.wait(unit, "waiting for "+apply.Summarize(notReady))
		l.log.Info("unit waiting", "unit", unit, "revision", revision, "notReady", apply.Summarize(notReady))
	}
}

func hooks(hs []render.Hook) []apply.Hook {
	out := make([]apply.Hook, len(hs))
	for i, h := range hs {
		out[i] = apply.Hook{Object: h.Object, Events: h.Events, Weight: h.Weight, DeletePolicies: h.DeletePolicies}
	}
	return out
}

func (l *Loop) countResult(rc *cycleRun, st *unitState, res *apply.UnitResult) {
	if res.Applied() > 0 || len(res.Pruned) > 0 {
		rc.applied.Add(1)
	}
	if res.DriftCorrected > 0 {
		rc.driftCorrected.Add(int64(res.DriftCorrected))
		st.drift += int64(res.DriftCorrected)
	}
}

// recheckReady reports whether a Ready, up-to-date unit's health is read
// again this cycle: with wait, while it has been Ready at its content for
// less than Config.ReadyRecheck.
func (l *Loop) recheckReady(u slice.Unit, st *unitState) bool {
	return u.Wait && l.cfg.ReadyRecheck > 0 && st.readySince != nil && st.readyHash == u.Hash &&
		time.Since(st.readySince.Time) < l.cfg.ReadyRecheck
}

// healthOutcome is how a unit's health wait ended (at: where its objects
// are): Ready; interrupted by a newer revision; failed at once by a
// Failed object, which only a change will fix; or still not Ready at its
// timeout (or after a failed read), which a later cycle waits for again.
func (l *Loop) healthOutcome(rc *cycleRun, u slice.Unit, st *unitState, ready bool, notReady []string, err error, deadline time.Time, at revisionState) outcome {
	if !errors.Is(err, apply.ErrWaitInterrupted) {
		st.resume = nil
	}
	switch {
	case ready && err == nil:
		return outcome{reason: status.ReasonSucceeded, at: at}
	case errors.Is(err, apply.ErrWaitInterrupted):
		return l.interrupted(rc, u, st, notReady, deadline, at)
	case errors.Is(err, apply.ErrHealthFailed):
		o := failed(err, "unit failed its health check", "revision", rc.rev.res.Revision)
		o.at = at
		return o
	case errors.Is(err, apply.ErrHealthTimeout) && len(notReady) > 0 && at == foundAt:
		return outcome{reason: status.ReasonHealthCheckFailed, message: "not ready: " + apply.Summarize(notReady), progressing: true, at: at}
	}
	o := failed(err, "unit failed", "revision", rc.rev.res.Revision)
	o.progressing, o.at = true, at
	return o
}
