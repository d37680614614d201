package reconcile

import (
	"context"
	"errors"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/health"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// suspendUnit handles a unit its slice suspends: nothing is rendered,
// applied, pruned or corrected, whatever its sources or the live objects
// say. Its inventory and health are read (no writes) so that status tells
// what the cluster runs and dependents may go on when its objects are
// Ready; its outcome is recorded like any unit's (finishUnit). It reports
// whether the unit is Ready.
func (l *Loop) suspendUnit(ctx context.Context, rc *cycleRun, u slice.Unit, st *unitState) bool {
	if !st.suspended {
		l.log.Info("unit suspended: its objects are left as they are", "unit", u.Name, "revision", rc.rev.res.Revision)
	}
	st.suspended = true
	applied := "never applied"
	ready := false
	if chk, err := l.cfg.Applier.Check(ctx, u.Name, rc.obs); err == nil && chk.Exists {
		st.objects = chk.ManagedObjects
		st.hash = chk.Hash
		if chk.Revision != "" {
			st.appliedRevision = chk.Revision
		}
		checks, _ := health.Compile(u.HealthChecks) // a check that does not compile leaves kstatus
		ok, _, err := l.cfg.Applier.CheckReady(ctx, u.Name, checks)
		ready = err == nil && ok
		if err != nil && !errors.Is(err, apply.ErrNoInventory) {
			l.log.Debug("suspended unit's health unknown", "unit", u.Name, "error", l.redact.Error(err))
		}
	}
	if st.appliedRevision != "" {
		applied = "as applied at " + st.appliedRevision
	}
	return l.finishUnit(rc, u, st, outcome{
		suspended: true, objectsReady: ready, reason: status.ReasonSuspended, keepLastError: true,
		message: "suspended in the fleet repo: not applied, pruned or corrected; its objects stay " + applied,
	})
}
