package reconcile

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// A new revision ends a health wait. While a cycle's units run, the loop
// goes on polling Git every poll interval (and on Trigger), as it does
// between cycles. A newer revision that passes verification and whose
// slice changes any unit (as Flux's CancelHealthCheckOnNewRevision)
// closes the cycle's interrupt: every health wait ends at once, nothing
// being applied is stopped half-way, and the cycle ends so that the next
// one reconciles the newer revision. A unit the newer revision changes is
// recorded Superseded; one it leaves as it is goes on waiting in the next
// cycle, until the deadline it had (watchedWait).

// revisionWatch is what the watch found during one cycle.
type revisionWatch struct {
	// interrupt closes when newer is set.
	interrupt chan struct{}
	// newer is the accepted revision that ended the waits, and changed the
	// units of the cycle's slice it changes or removes (both set before
	// interrupt closes).
	newer   *acceptedRev
	changed map[string]bool
	// next is the last sync that moved the head, for the next cycle to
	// reconcile at once (read after the watch stopped).
	next *syncOutcome
	// triggered: the watch took a Trigger meant for Run.
	triggered bool
}

// watchRevisions polls Git until stop is called or a newer revision ends
// the cycle's waits. rc.rev's checkout is held meanwhile: a sync must not
// remove what the cycle still renders from.
func (l *Loop) watchRevisions(ctx context.Context, rc *cycleRun) (stop func()) {
	w := &revisionWatch{interrupt: make(chan struct{})}
	rc.watch = w
	release := func() {}
	if h, ok := l.cfg.Source.(Holder); ok {
		release = h.Hold(rc.rev.res.Dir)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			t := time.NewTimer(pollDelay(l.cfg.PollInterval, l.cfg.Interval, l.cfg.Jitter, l.syncFailures))
			select {
			case <-done:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-l.trigger:
				w.triggered = true
			case <-t.C:
			}
			t.Stop()
			if l.pollDuringWait(ctx, rc, w) {
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		release()
	}
}

// pollDuringWait syncs once and reports whether a newer revision ended
// the cycle's waits.
func (l *Loop) pollDuringWait(ctx context.Context, rc *cycleRun, w *revisionWatch) bool {
	so := l.sync(ctx)
	if so.err != nil || !so.res.Changed {
		return false
	}
	w.next = &so
	l.desired = so.res.Revision
	rev, _, err := l.accept(ctx, so.res)
	if err != nil {
		// The next cycle refuses it again, and says so.
		l.log.Info("a newer revision arrived but was not accepted; the waits go on", "revision", so.res.Revision, "error", l.redact.Error(err))
		return false
	}
	changed := changedUnits(rc.rev.slice, rev.slice)
	if len(changed) == 0 {
		return false
	}
	l.log.Info("a newer revision changes this cluster's units: ending the health waits", "revision", rev.res.Revision, "changed", apply.Summarize(changed))
	w.newer, w.changed = rev, make(map[string]bool, len(changed))
	for _, name := range changed {
		w.changed[name] = true
	}
	close(w.interrupt)
	return true
}

// changedUnits names the units of old that next changes or removes, and
// those it adds; all of them when the decommission marker changes.
func changedUnits(old, next *slice.Slice) []string {
	var changed []string
	byName := make(map[string]*slice.Unit, len(next.Units))
	for i := range next.Units {
		byName[next.Units[i].Name] = &next.Units[i]
	}
	seen := map[string]bool{}
	for i := range old.Units {
		u := &old.Units[i]
		seen[u.Name] = true
		if n := byName[u.Name]; n == nil || old.Decommission != next.Decommission || !reflect.DeepEqual(u, n) {
			changed = append(changed, u.Name)
		}
	}
	for _, u := range next.Units {
		if !seen[u.Name] {
			changed = append(changed, u.Name)
		}
	}
	return changed
}

// supersededBy returns the newer revision that ended the cycle's waits
// and whether it changes unit u; nil before any did.
func (rc *cycleRun) supersededBy(u slice.Unit) (*acceptedRev, bool) {
	w := rc.watch
	if w == nil {
		return nil, false
	}
	select {
	case <-w.interrupt:
		return w.newer, w.changed[u.Name]
	default:
		return nil, false
	}
}

// interrupt is the channel a unit's health wait ends on (nil: never).
func (rc *cycleRun) interrupt() <-chan struct{} {
	if rc.watch == nil {
		return nil
	}
	return rc.watch.interrupt
}

// watchedWait is a health wait a newer revision ended while it left the
// unit as it is: the next cycle goes on waiting until the same deadline.
type watchedWait struct {
	hash     string
	deadline time.Time
}

// waitTimeout is how long a unit at u's content may still wait: what is
// left of an interrupted wait at the same content, else its timeout.
func waitTimeout(u slice.Unit, st *unitState, now time.Time) time.Duration {
	if r := st.resume; r != nil && r.hash == u.Hash {
		return max(r.deadline.Sub(now), time.Second)
	}
	return u.Timeout.Duration
}

// interrupted is the outcome of a unit whose health wait a newer revision
// ended: Superseded when that revision changes it, else still waiting
// (until deadline, in the next cycle).
func (l *Loop) interrupted(rc *cycleRun, u slice.Unit, st *unitState, notReady []string, deadline time.Time, at revisionState) outcome {
	newer, changed := rc.supersededBy(u)
	waitingFor := "health"
	if len(notReady) > 0 {
		waitingFor = apply.Summarize(notReady)
	}
	if changed {
		st.resume = nil
		return outcome{
			reason: status.ReasonSuperseded, progressing: true, count: countWaiting, at: at,
			message: "superseded by " + status.ShortRevision(newer.res.Revision) + " while waiting for " + waitingFor,
			log:     "unit superseded by a newer revision while waiting for health", logAttrs: []any{"newer", newer.res.Revision},
		}
	}
	st.resume = &watchedWait{hash: u.Hash, deadline: deadline}
	return outcome{
		reason: status.ReasonProgressing, progressing: true, count: countWaiting, at: at,
		message: "waiting for " + waitingFor + "; the wait goes on at " + status.ShortRevision(newer.res.Revision),
	}
}
