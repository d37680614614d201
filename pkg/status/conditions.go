package status

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// failureReasons are the Ready=False reasons that mean a unit failed, as
// opposed to one still progressing or waiting for a dependency.
var failureReasons = map[string]bool{
	ReasonRenderFailed:       true,
	ReasonDecryptionFailed:   true,
	ReasonApplyFailed:        true,
	ReasonPruneFailed:        true,
	ReasonHealthCheckFailed:  true,
	ReasonGitOperationFailed: true,
	ReasonVerificationFailed: true,
	ReasonHookFailed:         true,
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// UnitReady reports whether the unit's Ready condition is True.
func UnitReady(u UnitStatus) bool {
	c := findCondition(u.Conditions, ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

// UnitWaiting is what the unit waits for while the agent reconciles it
// (its Reconciling condition's message), or "" when it is not waiting.
func UnitWaiting(u UnitStatus) string {
	if c := findCondition(u.Conditions, ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	return ""
}

// UnitFailing reports whether the unit is Stalled, or not Ready for a
// failure reason. A health check the agent is still waiting for
// (HealthCheckFailed while Reconciling) is progress, not failure.
func UnitFailing(u UnitStatus) bool {
	if c := findCondition(u.Conditions, ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return true
	}
	c := findCondition(u.Conditions, ConditionReady)
	if c == nil {
		return u.LastError != ""
	}
	if c.Status != metav1.ConditionFalse || !failureReasons[c.Reason] {
		return false
	}
	if r := findCondition(u.Conditions, ConditionReconciling); c.Reason == ReasonHealthCheckFailed && r != nil && r.Status == metav1.ConditionTrue {
		return false
	}
	return true
}

// UnitFailure returns the reason and message that explain a failing unit.
func UnitFailure(u UnitStatus) (reason, message string) {
	if c := findCondition(u.Conditions, ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		reason, message = c.Reason, c.Message
	}
	if c := findCondition(u.Conditions, ConditionReady); c != nil && c.Status == metav1.ConditionFalse && (reason == "" || failureReasons[c.Reason]) {
		reason, message = c.Reason, c.Message
	}
	if message == "" {
		message = u.LastError
	}
	if reason == "" {
		reason = "Error"
	}
	return reason, message
}

// ClusterFailure returns why the loop as a whole failed (Stalled, or a
// loop-level error such as a failed fetch or a refused commit), or "" when
// it did not; failing units are reported on their own.
func ClusterFailure(doc *ClusterStatus) (reason, message string) {
	if c := findCondition(doc.Conditions, ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason, c.Message
	}
	if doc.LastError != "" {
		reason := "Error"
		if c := findCondition(doc.Conditions, ConditionReady); c != nil && c.Status == metav1.ConditionFalse && failureReasons[c.Reason] {
			reason = c.Reason
		}
		return reason, doc.LastError
	}
	return "", ""
}

// ShortRevision abbreviates "main@sha1:<40 hex>" to "main@sha1:<12 hex>".
func ShortRevision(rev string) string {
	h := RevisionHash(rev)
	if len(h) <= 12 {
		return rev
	}
	return strings.TrimSuffix(rev, h) + h[:12]
}

// PruneHeld returns the message of the cluster's PruneHeld condition when
// its agent is holding a prune, else "".
func PruneHeld(doc *ClusterStatus) string {
	if c := findCondition(doc.Conditions, ConditionPruneHeld); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	return ""
}
