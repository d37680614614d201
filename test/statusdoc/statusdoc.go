// Package statusdoc builds status documents, and the credentials an agent
// pushes them with, for tests that write or read status refs.
package statusdoc

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// T0 is when the documents' conditions last changed; golden files depend
// on it.
var T0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// Ready is a healthy document for cluster at revision rev, with units
// ("web" when none are given).
func Ready(cluster, rev string, units ...string) *status.ClusterStatus {
	if len(units) == 0 {
		units = []string{"web"}
	}
	d := &status.ClusterStatus{
		Cluster:         cluster,
		Agent:           status.Agent{Version: "test"},
		DesiredRevision: rev, FetchedRevision: rev, AppliedRevision: rev,
		Conditions: readyConditions("Applied revision: " + rev),
	}
	for _, u := range units {
		d.Units = append(d.Units, status.UnitStatus{Name: u, Hash: "sha256:" + u, AppliedRevision: rev, Objects: 2,
			Conditions: readyConditions("")})
	}
	return d
}

func readyConditions(msg string) []metav1.Condition {
	return []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSucceeded, Message: msg,
		LastTransitionTime: metav1.NewTime(T0)}}
}

// FailUnit marks a unit of d as failed (and stalled) with reason and msg.
func FailUnit(d *status.ClusterStatus, unit, reason, msg string) {
	for i := range d.Units {
		if d.Units[i].Name == unit {
			d.Units[i].LastError = msg
			d.Units[i].Conditions = []metav1.Condition{
				{Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(T0)},
				{Type: status.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(T0)},
			}
		}
	}
	d.AppliedRevision = ""
	d.Conditions = []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: "units " + unit + " not ready", LastTransitionTime: metav1.NewTime(T0)}}
}

// AgentAuth is the credential the forge rules of srv give cluster's agent.
func AgentAuth(srv *gitserver.Server, cluster string) gitrepo.Auth {
	user := gitserver.AgentUser(cluster)
	return gitrepo.Auth{Username: user, Password: srv.Password(user)}
}
