package reconcile

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

func TestRecordOutcome(t *testing.T) {
	r := redact.New("hunter2-token")
	cond := func(st *unitState, typ string) string {
		c := apimeta.FindStatusCondition(st.conditions, typ)
		if c == nil {
			return "-"
		}
		return string(c.Status) + "/" + c.Reason + ": " + c.Message
	}
	st := &unitState{}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

	st.record(outcome{err: status.Stalling(status.ReasonApplyFailed, errors.New("token hunter2-token rejected"))}, r, "main@sha1:1", "sha256:h1", now)
	if st.ready || st.lastError != "token "+redact.Mask+" rejected" ||
		cond(st, status.ConditionReady) != "False/"+status.ReasonApplyFailed+": token "+redact.Mask+" rejected" ||
		cond(st, status.ConditionStalled) != "True/"+status.ReasonApplyFailed+": token "+redact.Mask+" rejected" ||
		cond(st, status.ConditionReconciling) != "-" {
		t.Errorf("failed: %+v", st)
	}

	st.record(outcome{reason: status.ReasonDependencyNotReady, message: "dependencies not ready: a", keepLastError: true, progressing: true}, r, "main@sha1:1", "sha256:h1", now)
	if st.ready || st.lastError != "token "+redact.Mask+" rejected" ||
		cond(st, status.ConditionReady) != "False/"+status.ReasonDependencyNotReady+": dependencies not ready: a" ||
		cond(st, status.ConditionStalled) != "-" ||
		cond(st, status.ConditionReconciling) != "True/"+status.ReasonProgressing+": dependencies not ready: a" {
		t.Errorf("waiting: %+v", st)
	}

	st.record(outcome{reason: status.ReasonHealthCheckFailed, message: "not ready: Deployment/a/b", progressing: true}, r, "main@sha1:1", "sha256:h1", now)
	if st.lastError != "not ready: Deployment/a/b" || cond(st, status.ConditionReady) != "False/"+status.ReasonHealthCheckFailed+": not ready: Deployment/a/b" {
		t.Errorf("not ready: %+v", st)
	}

	st.record(outcome{reason: status.ReasonSucceeded}, r, "main@sha1:2", "sha256:h2", now)
	if !st.ready || st.lastError != "" || len(st.conditions) != 1 ||
		cond(st, status.ConditionReady) != string(metav1.ConditionTrue)+"/"+status.ReasonSucceeded+": Applied revision: main@sha1:2" {
		t.Errorf("ready: %+v", st)
	}
	since := st.readySince

	// Suspended: Ready as its objects are, reason Suspended; readiness at
	// its content and the last error stay as the last reconcile left them.
	st.lastError = "an earlier failure"
	st.record(outcome{suspended: true, objectsReady: false, reason: status.ReasonSuspended, message: "suspended", keepLastError: true, progressing: true},
		r, "main@sha1:3", "sha256:h3", now.Add(time.Hour))
	if st.ready || !st.suspended || st.lastError != "an earlier failure" || st.readySince != since ||
		cond(st, status.ConditionReady) != "False/"+status.ReasonSuspended+": suspended" || cond(st, status.ConditionReconciling) != "-" {
		t.Errorf("suspended, its objects not Ready: %+v", st)
	}
	st.record(outcome{suspended: true, objectsReady: true, reason: status.ReasonSuspended, message: "suspended", keepLastError: true},
		r, "main@sha1:3", "sha256:h3", now.Add(time.Hour))
	if !st.ready || !st.suspended || cond(st, status.ConditionReady) != "True/"+status.ReasonSuspended+": suspended" {
		t.Errorf("suspended, its objects Ready: %+v", st)
	}
	st.record(outcome{reason: status.ReasonSucceeded}, r, "main@sha1:4", "sha256:h2", now.Add(2*time.Hour))
	if st.suspended || !st.ready {
		t.Errorf("resumed: %+v", st)
	}
}

// TestRecordReadiness: readySince is the start of the unit's unbroken Ready
// run at its current content, whatever the Ready condition's transition
// time says; readyHashes keeps the contents it has been Ready at.
func TestRecordReadiness(t *testing.T) {
	r := redact.Scrubber{}
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ready := outcome{reason: status.ReasonSucceeded}
	failed := outcome{err: status.Retrying(status.ReasonApplyFailed, errors.New("denied"))}
	unhealthy := outcome{reason: status.ReasonHealthCheckFailed, message: "not ready", progressing: true}
	type step struct {
		o      outcome
		hash   string
		at     time.Duration
		since  time.Duration // -1: no readySince
		hashes string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"ready, then ready again at the same content keeps the time", []step{
			{ready, "h1", 0, 0, "h1"}, {ready, "h1", time.Minute, 0, "h1"}}},
		{"new content while Ready restarts it", []step{
			{ready, "h1", 0, 0, "h1"}, {ready, "h2", time.Minute, time.Minute, "h2 h1"}}},
		{"a break restarts it", []step{
			{ready, "h1", 0, 0, "h1"}, {unhealthy, "h1", time.Minute, -1, "h1"}, {ready, "h1", 2 * time.Minute, 2 * time.Minute, "h1"}}},
		{"content that never became Ready is not kept", []step{
			{ready, "h1", 0, 0, "h1"}, {failed, "h2", time.Minute, -1, "h1"}, {ready, "h3", 2 * time.Minute, 2 * time.Minute, "h3 h1"}}},
		{"back to an earlier content moves it to the front, bounded", []step{
			{ready, "h1", 0, 0, "h1"}, {ready, "h2", 1, 1, "h2 h1"}, {ready, "h3", 2, 2, "h3 h2 h1"}, {ready, "h4", 3, 3, "h4 h3 h2 h1"},
			{ready, "h2", 4, 4, "h2 h4 h3 h1"}, {ready, "h5", 5, 5, "h5 h2 h4 h3"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &unitState{}
			for i, s := range tc.steps {
				st.record(s.o, r, "main@sha1:1", s.hash, t0.Add(s.at))
				u := st.status("web", s.hash)
				switch {
				case s.since < 0 && (u.ReadySince != nil || u.ReadyHash != ""):
					t.Errorf("step %d: readySince %v readyHash %q, want none", i, u.ReadySince, u.ReadyHash)
				case s.since >= 0 && (u.ReadySince == nil || !u.ReadySince.Time.Equal(t0.Add(s.since).Truncate(time.Second)) || u.ReadyHash != s.hash):
					t.Errorf("step %d: readySince %v readyHash %q, want %s at %s", i, u.ReadySince, u.ReadyHash, t0.Add(s.since), s.hash)
				}
				if got := strings.Join(u.ReadyHashes, " "); got != s.hashes {
					t.Errorf("step %d: readyHashes %q, want %q", i, got, s.hashes)
				}
				if len(u.ReadyHashes) > status.MaxReadyHashes || !slices.Equal(u.ReadyHashes, st.readyHashes) {
					t.Errorf("step %d: readyHashes %v", i, u.ReadyHashes)
				}
			}
		})
	}
}
