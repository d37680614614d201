package reconcile

import (
	"slices"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// buildStatus assembles the cycle's status document. The loop's state is
// read after every unit worker has finished.
func (l *Loop) buildStatus(rc *cycleRun, fetched string, verif *status.Verification, problems []*status.Failure) *status.ClusterStatus {
	st := &status.ClusterStatus{
		APIVersion:      status.APIVersion,
		Kind:            status.Kind,
		Cluster:         l.cfg.Cluster,
		Agent:           status.Agent{Version: l.cfg.AgentVersion, Identity: l.cfg.Identity},
		DesiredRevision: l.desired,
		FetchedRevision: fetched,
		Verification:    verif,
		Heartbeat:       metav1.NewTime(time.Now().UTC().Truncate(time.Second)),
	}
	if l.infoOK {
		st.KubernetesVersion = l.info.KubeVersion
		st.APIVersions = slices.Clone(l.info.GroupVersions)
	}
	var msgs []string
	for _, p := range problems {
		msgs = append(msgs, l.redact.Error(p))
	}
	st.LastError = strings.Join(msgs, "; ")

	revision := ""
	if rc.rev != nil {
		revision = rc.rev.res.Revision
		l.unitsMu.Lock()
		for _, u := range rc.rev.slice.Units {
			us := l.units[u.Name]
			if us == nil {
				continue
			}
			hash := u.Hash
			if us.suspended {
				// What the cluster runs, not what the slice asks for:
				// a rollout gate must not take it as applied.
				hash = ""
			}
			st.Units = append(st.Units, us.status(u.Name, hash))
		}
		l.unitsMu.Unlock()
	}
	removed := make([]string, 0, len(l.removed))
	for name := range l.removed {
		removed = append(removed, name)
	}
	sort.Strings(removed)
	for _, name := range removed {
		st.Units = append(st.Units, l.removed[name].status(name, ""))
	}

	// Applied: every unit of the slice applied at the desired revision.
	complete := rc.rev != nil && revision == l.desired && len(removed) == 0 && rc.held == nil
	for _, u := range st.Units {
		// A suspended unit stays where it was on purpose: it does not
		// hold the cluster's applied revision back.
		if u.AppliedRevision != revision && !u.Suspended {
			complete = false
		}
	}
	if complete {
		l.appliedRevision = revision
	}
	st.AppliedRevision = l.appliedRevision

	l.setClusterConditions(st, rc, problems)
	st.Conditions = slices.Clone(l.clusterConditions)
	return st
}

func (us *unitState) status(name, hash string) status.UnitStatus {
	if hash == "" {
		hash = us.hash
	}
	return status.UnitStatus{
		Name:             name,
		Hash:             hash,
		AppliedRevision:  us.appliedRevision,
		Conditions:       slices.Clone(us.conditions),
		Objects:          us.objects,
		DriftCorrections: us.drift,
		LastError:        us.lastError,
		Suspended:        us.suspended,
		ReadyHash:        us.readyHash,
		ReadySince:       us.readySince.DeepCopy(),
		ReadyHashes:      slices.Clone(us.readyHashes),
	}
}

// setClusterConditions summarises the cycle: Ready when every unit is Ready
// and nothing failed at loop level; Stalled when a refused commit, an
// unreadable slice or a unit that only a Git change can fix holds things
// up; Reconciling while units wait for dependencies or health.
func (l *Loop) setClusterConditions(st *status.ClusterStatus, rc *cycleRun, problems []*status.Failure) {
	conds := &l.clusterConditions
	var notReady, stalled, progressing []status.UnitStatus
	for _, u := range st.Units {
		if !unitReady(u) {
			notReady = append(notReady, u)
		}
		if c := apimeta.FindStatusCondition(u.Conditions, status.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			stalled = append(stalled, u)
		}
		if c := apimeta.FindStatusCondition(u.Conditions, status.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
			progressing = append(progressing, u)
		}
	}

	ready := metav1.Condition{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSucceeded}
	switch {
	case len(problems) > 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, problems[0].Reason, st.LastError
	case len(notReady) > 0:
		c := apimeta.FindStatusCondition(notReady[0].Conditions, status.ConditionReady)
		ready.Status, ready.Reason = metav1.ConditionFalse, status.ReasonProgressing
		if c != nil {
			ready.Reason = c.Reason
		}
		ready.Message = unitNames(notReady) + " not ready"
	case rc.held != nil:
		ready.Status, ready.Reason = metav1.ConditionFalse, status.ReasonAwaitingDecommission
		ready.Message = "units that left the slice are held, not pruned; see " + status.ConditionPruneHeld
	default:
		ready.Message = "Applied revision: " + rc.rev.res.Revision
	}
	apimeta.SetStatusCondition(conds, ready)

	var stall *metav1.Condition
	for _, p := range problems {
		if p.Stalled {
			stall = &metav1.Condition{Type: status.ConditionStalled, Status: metav1.ConditionTrue, Reason: p.Reason, Message: st.LastError}
			break
		}
	}
	if stall == nil && len(stalled) > 0 {
		c := apimeta.FindStatusCondition(stalled[0].Conditions, status.ConditionStalled)
		stall = &metav1.Condition{Type: status.ConditionStalled, Status: metav1.ConditionTrue, Reason: c.Reason,
			Message: unitNames(stalled) + " cannot proceed until the fleet repo changes"}
	}
	if stall != nil {
		apimeta.SetStatusCondition(conds, *stall)
	} else {
		apimeta.RemoveStatusCondition(conds, status.ConditionStalled)
	}

	if rc.held != nil {
		apimeta.SetStatusCondition(conds, rc.held.condition(l.cfg.Cluster))
	} else {
		apimeta.RemoveStatusCondition(conds, status.ConditionPruneHeld)
	}

	if len(progressing) > 0 {
		apimeta.SetStatusCondition(conds, metav1.Condition{Type: status.ConditionReconciling, Status: metav1.ConditionTrue,
			Reason: status.ReasonProgressing, Message: unitNames(progressing) + " in progress"})
	} else {
		apimeta.RemoveStatusCondition(conds, status.ConditionReconciling)
	}
}

func unitNames(us []status.UnitStatus) string {
	names := make([]string, len(us))
	for i, u := range us {
		names[i] = u.Name
	}
	return "units " + apply.Summarize(names)
}
