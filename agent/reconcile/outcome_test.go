package reconcile

import (
	"errors"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/status"
)

func TestRecordOutcome(t *testing.T) {
	r := newRedactor([]string{"hunter2-token"})
	cond := func(st *unitState, typ string) string {
		c := apimeta.FindStatusCondition(st.conditions, typ)
		if c == nil {
			return "-"
		}
		return string(c.Status) + "/" + c.Reason + ": " + c.Message
	}
	st := &unitState{}

	st.record(outcome{reason: status.ReasonApplyFailed, err: errors.New("token hunter2-token rejected"), stalled: true}, r, "main@sha1:1")
	if st.ready || st.lastError != "token *** rejected" ||
		cond(st, status.ConditionReady) != "False/"+status.ReasonApplyFailed+": token *** rejected" ||
		cond(st, status.ConditionStalled) != "True/"+status.ReasonApplyFailed+": token *** rejected" ||
		cond(st, status.ConditionReconciling) != "-" {
		t.Errorf("failed: %+v", st)
	}

	st.record(outcome{reason: status.ReasonDependencyNotReady, message: "dependencies not ready: a", keepLastError: true, progressing: true}, r, "main@sha1:1")
	if st.ready || st.lastError != "token *** rejected" ||
		cond(st, status.ConditionReady) != "False/"+status.ReasonDependencyNotReady+": dependencies not ready: a" ||
		cond(st, status.ConditionStalled) != "-" ||
		cond(st, status.ConditionReconciling) != "True/"+status.ReasonProgressing+": dependencies not ready: a" {
		t.Errorf("waiting: %+v", st)
	}

	st.record(outcome{reason: status.ReasonHealthCheckFailed, notReady: "not ready: Deployment/a/b", progressing: true}, r, "main@sha1:1")
	if st.lastError != "not ready: Deployment/a/b" || cond(st, status.ConditionReady) != "False/"+status.ReasonHealthCheckFailed+": not ready: Deployment/a/b" {
		t.Errorf("not ready: %+v", st)
	}

	st.record(outcome{reason: status.ReasonSucceeded}, r, "main@sha1:2")
	if !st.ready || st.lastError != "" || len(st.conditions) != 1 ||
		cond(st, status.ConditionReady) != string(metav1.ConditionTrue)+"/"+status.ReasonSucceeded+": Applied revision: main@sha1:2" {
		t.Errorf("ready: %+v", st)
	}
}
