package reconcile

import (
	"context"
	"strings"

	"github.com/flotilla-gitops/flotilla/agent/volcano"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Volcano handles the units of kind volcano; *volcano.Manager implements
// it. Without one (Config.Volcano nil) volcano units are applied like
// manifests.
type Volcano interface {
	// Installed: nil, or why Volcano's APIs cannot be used (a
	// *status.Failure for volcano.ErrNotInstalled or a discovery error).
	Installed(ctx context.Context) error
	// SubmitJob creates a job unit's job, never re-applying it; its error
	// is a *status.Failure.
	SubmitJob(ctx context.Context, req volcano.JobRequest) (*volcano.JobResult, error)
	// RetainRemoved: a job unit that left the slice is kept for now.
	RetainRemoved(ctx context.Context, unit string) (bool, error)
	// Report lists jobs and takes the capacity snapshot for status.
	Report(ctx context.Context, jobUnits []string) (*volcano.Report, error)
}

func isVolcanoJob(u slice.Unit) bool {
	return u.Kind == slice.UnitVolcano && strings.HasPrefix(u.Name, slice.VolcanoJobPrefix)
}

// route is how a unit reaches the cluster, decided in one place for the
// unit's reconcile and the cycle's report: a volcano unit needs Volcano's
// APIs served first (nothing of it is applied otherwise), and a job unit is
// submitted to Volcano instead of applied. Without a Volcano manager,
// volcano units are applied like manifests.
type route struct {
	needsVolcano, submitJob bool
}

func (l *Loop) route(u slice.Unit) route {
	if l.cfg.Volcano == nil || u.Kind != slice.UnitVolcano {
		return route{}
	}
	return route{needsVolcano: true, submitJob: isVolcanoJob(u)}
}

// submitJob hands a rendered job unit to Volcano instead of Applier.Apply.
func (l *Loop) submitJob(ctx context.Context, rc *cycleRun, u slice.Unit, st *unitState, out *render.Result) outcome {
	rev := rc.rev.res
	res, err := l.cfg.Volcano.SubmitJob(ctx, volcano.JobRequest{
		Unit: u.Name, Revision: rev.Revision, Hash: u.Hash, Objects: out.Objects,
		Prune: u.Prune, Timeout: u.Timeout.Duration, Observed: rc.obs,
	})
	if res != nil && res.Applied != nil {
		st.objects = res.Applied.ManagedObjects
		l.countResult(rc, st, res.Applied)
	}
	switch {
	case err != nil:
		return failed(err, "job unit failed")
	case !res.Ready:
		// An unschedulable job needs a change (in Git or in capacity); the
		// others are on their way.
		msg := l.redact.String(res.Message)
		o := outcome{
			reason: res.Reason, message: msg, progressing: res.Reason != volcano.ReasonUnschedulable, count: countWaiting,
			log:      "job not submitted at this revision",
			logAttrs: []any{"job", res.Job.String(), "action", res.Action, "reason", res.Reason, "message", msg},
		}
		if !o.progressing {
			o.count = countFailed
		}
		return o
	case res.Action == volcano.ActionUnchanged:
		return outcome{reason: status.ReasonSucceeded, at: appliedAt}
	}
	attrs := []any{"job", res.Job.String(), "action", res.Action}
	if res.Preflight != nil {
		attrs = append(attrs, "preflight", res.Preflight.Verdict)
	}
	return outcome{reason: status.ReasonSucceeded, at: appliedAt, log: "job unit reconciled", logAttrs: attrs}
}

// retainJob reports whether a job unit that left the slice is kept this
// cycle (its job finished within the retention time).
func (l *Loop) retainJob(ctx context.Context, unit string) bool {
	if l.cfg.Volcano == nil || !strings.HasPrefix(unit, slice.VolcanoJobPrefix) {
		return false
	}
	keep, err := l.cfg.Volcano.RetainRemoved(ctx, unit)
	if err != nil {
		// Deleting is what a removed unit asks for; a failed check only
		// loses the retention.
		l.log.Warn("checking a removed job's retention failed; deleting it", "unit", unit, "error", l.redact.Error(err))
		return false
	}
	if keep {
		l.log.Debug("finished job kept after its unit left the slice", "unit", unit)
	}
	return keep
}

// addVolcanoStatus puts the Volcano jobs and the capacity snapshot into
// the cycle's status document.
func (l *Loop) addVolcanoStatus(ctx context.Context, rc *cycleRun, st *status.ClusterStatus) {
	if l.cfg.Volcano == nil {
		return
	}
	var jobUnits []string
	if rc.rev != nil {
		for _, u := range rc.rev.slice.Units {
			if l.route(u).submitJob {
				jobUnits = append(jobUnits, u.Name)
			}
		}
	}
	rep, err := l.cfg.Volcano.Report(ctx, jobUnits)
	if err != nil {
		l.log.Warn("volcano job and capacity report failed", "error", l.redact.Error(err))
	}
	if rep == nil {
		return
	}
	st.Jobs = rep.Jobs
	for i := range st.Jobs {
		st.Jobs[i].Message = l.redact.String(st.Jobs[i].Message)
	}
	st.Capacity = rep.Capacity
}
