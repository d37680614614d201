package reconcile

import (
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// outcome is how a unit's reconcile ended in a cycle. Every branch of the
// unit's reconcile describes its end as one outcome and finishUnit records
// it, so that conditions, last error, cycle counts and the last good
// revision cannot drift apart between branches.
type outcome struct {
	// err is what failed, if anything: the *status.Failure in it names the
	// Ready=False reason and whether the unit is stalled (only a change in
	// Git can fix it); its redacted text is the unit's last error and the
	// condition message.
	err error
	// reason, when err is nil, is status.ReasonSucceeded for a Ready unit,
	// otherwise why it is not Ready yet.
	reason string
	// message is the condition message: in place of the error when err
	// is set, else also the last error (a unit that failed no request but
	// is not Ready, its health), taken as is.
	message string
	// keepLastError leaves the last error as it was: the unit did not run
	// (it waits for its dependencies).
	keepLastError bool
	// progressing: a later cycle may succeed on its own (the Reconciling
	// condition).
	progressing bool
	// count is the cycle counter the unit adds to.
	count unitCount
	// at says whether the unit's objects are at the cycle's revision.
	at revisionState
	// suspended: the fleet repo suspends the unit, which was not
	// reconciled (reason Suspended); objectsReady says whether its objects
	// are Ready as they are, which is its Ready status.
	suspended, objectsReady bool
	// log, when set, is logged with logAttrs and the unit's name (and
	// the error at Warn level when err is set).
	log      string
	logAttrs []any
}

// failed is the outcome of a unit whose reconcile failed with err: the
// reason and whether it stalls are the ones err carries (a
// *status.Failure; ApplyFailed, retried, when it carries none), logged as
// log with attrs and the reason.
func failed(err error, log string, attrs ...any) outcome {
	return outcome{
		err: err, count: countFailed,
		log: log, logAttrs: append([]any{"reason", failureOf(err).Reason}, attrs...),
	}
}

// failureOf is how a unit's error is reported: the reason it carries, else
// a retried ApplyFailed.
func failureOf(err error) *status.Failure { return status.FailureOf(err, status.ReasonApplyFailed) }

// revisionState says whether an outcome leaves the unit's objects at the
// cycle's revision (also when only their health failed), which makes that
// revision the unit's applied revision and its last good source.
type revisionState int

const (
	notAt revisionState = iota
	// appliedAt: the unit was applied (or found unchanged by Apply) at it.
	appliedAt
	// foundAt: the unit was found up to date without reading its checkout,
	// which then becomes its last good source only when it has none still
	// on disk (sources may have moved without re-rendering).
	foundAt
)

// unitCount says which of the cycle's counters an outcome adds to.
type unitCount int

const (
	_ unitCount = iota // the zero value adds to no counter
	// countFailed: the unit failed this cycle.
	countFailed
	// countWaiting: the unit is waiting (dependencies, a cancelled cycle,
	// a job not submitted yet).
	countWaiting
)

func (o outcome) ready() bool {
	return o.err == nil && (o.reason == status.ReasonSucceeded || o.suspended && o.objectsReady)
}

// finishUnit records a unit's outcome at rc's revision and reports whether
// the unit is Ready.
func (l *Loop) finishUnit(rc *cycleRun, u slice.Unit, st *unitState, o outcome) bool {
	rev := rc.rev.res
	if o.at != notAt {
		st.hash = u.Hash
		st.appliedRevision = rev.Revision
		if g := st.good; o.at == appliedAt || g == nil || g.unit.Hash != u.Hash || !dirExists(g.dir) {
			st.good = &goodSource{dir: rev.Dir, unit: u, revision: rev.Revision}
		}
	}
	switch o.count {
	case countFailed:
		rc.failed.Add(1)
	case countWaiting:
		rc.waiting.Add(1)
	}
	st.record(o, l.redact, rev.Revision, u.Hash, time.Now())
	if o.log != "" {
		attrs := append([]any{"unit", u.Name}, o.logAttrs...)
		if o.err != nil {
			l.log.Warn(o.log, append(attrs, "error", st.lastError)...)
		} else {
			l.log.Info(o.log, attrs...)
		}
	}
	return o.ready()
}

// record writes an outcome into the unit's status: the one place that sets
// its Ready, Stalled and Reconciling conditions, its last error and its
// readiness at its content. revision is the one a Ready unit applied, hash
// the content hash the outcome is about, now when it ended.
func (st *unitState) record(o outcome, r redact.Scrubber, revision, hash string, now time.Time) {
	conds := &st.conditions
	st.suspended = o.suspended
	st.ready = o.ready()
	if o.suspended {
		// Not reconciled: its readiness at its content and its last error
		// stay what the last reconcile left.
		ready := metav1.Condition{Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: o.reason, Message: o.message}
		if st.ready {
			ready.Status = metav1.ConditionTrue
		}
		apimeta.SetStatusCondition(conds, ready)
		apimeta.RemoveStatusCondition(conds, status.ConditionReconciling)
		apimeta.RemoveStatusCondition(conds, status.ConditionStalled)
		return
	}
	st.recordReadiness(hash, now)
	if st.ready {
		st.lastError = ""
		apimeta.SetStatusCondition(conds, metav1.Condition{
			Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSucceeded,
			Message: "Applied revision: " + revision,
		})
		apimeta.RemoveStatusCondition(conds, status.ConditionReconciling)
		apimeta.RemoveStatusCondition(conds, status.ConditionStalled)
		return
	}
	switch {
	case o.keepLastError:
	case o.err != nil:
		st.lastError = r.Error(o.err)
	default:
		st.lastError = o.message
	}
	msg := st.lastError
	if o.message != "" {
		msg = o.message
	}
	reason, stalled := o.reason, false
	if o.err != nil {
		f := failureOf(o.err)
		reason, stalled = f.Reason, f.Stalled
	}
	apimeta.SetStatusCondition(conds, metav1.Condition{
		Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg,
	})
	if stalled {
		apimeta.SetStatusCondition(conds, metav1.Condition{
			Type: status.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg,
		})
	} else {
		apimeta.RemoveStatusCondition(conds, status.ConditionStalled)
	}
	if o.progressing {
		apimeta.SetStatusCondition(conds, metav1.Condition{
			Type: status.ConditionReconciling, Status: metav1.ConditionTrue, Reason: status.ReasonProgressing, Message: msg,
		})
	} else {
		apimeta.RemoveStatusCondition(conds, status.ConditionReconciling)
	}
}

// recordReadiness keeps readySince at the start of the unit's unbroken
// Ready run at this hash. The Ready condition's transition time cannot
// serve: it does not move when a Ready unit is Ready again at new content,
// and a rollout's bake must count from the new content.
func (st *unitState) recordReadiness(hash string, now time.Time) {
	if !st.ready || hash == "" {
		st.readyHash, st.readySince = "", nil
		return
	}
	if st.readyHash != hash || st.readySince == nil {
		t := metav1.NewTime(now.UTC().Truncate(time.Second))
		st.readyHash, st.readySince = hash, &t
	}
	if len(st.readyHashes) == 0 || st.readyHashes[0] != hash {
		rest := slices.DeleteFunc(slices.Clone(st.readyHashes), func(h string) bool { return h == hash })
		st.readyHashes = append([]string{hash}, rest[:min(len(rest), status.MaxReadyHashes-1)]...)
	}
}
