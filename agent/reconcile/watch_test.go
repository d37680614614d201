package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// deploymentUnit is a unit whose Deployment never becomes Ready on the
// minimal cluster (no controllers), waited for for an hour.
func deploymentUnit(name, ns, image string) unit {
	return unit{name: name, wait: true, timeout: time.Hour, files: map[string]string{
		"kustomization.yaml": "resources:\n  - deploy.yaml\n",
		"deploy.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
  namespace: %s
spec:
  selector:
    matchLabels: {app: %s}
  template:
    metadata:
      labels: {app: %s}
    spec:
      containers: [{name: c, image: %s}]
`, name, ns, name, name, image),
	}}
}

// TestLoopNewRevisionEndsHealthWaits: a cycle whose units wait (timeout
// 1h) for Deployments that never become Ready ends once a newer revision
// that changes one of them is pushed: that unit is Superseded (neither
// Ready nor failing), the one the revision leaves as it is still waits,
// and the unit that was Ready stays Ready.
func TestLoopNewRevisionEndsHealthWaits(t *testing.T) {
	const name = "superseded"
	ns := name + "-apps"
	units := func(image string) []unit {
		return []unit{configMapUnit("settled", ns, "1"), deploymentUnit("stuck", ns, image), deploymentUnit("other", ns, "other:1")}
	}
	e := newEnv(t, name, units("stuck:1"), nil)
	done := e.cycleWaiting(ns, "stuck", "other")
	fix := "main@sha1:" + e.push(units("stuck:2"))
	r := endedBy(t, done, fix)
	if r.err != nil {
		t.Fatalf("cycle: %v", r.err)
	}
	stuck := unitStatus(r.st, "stuck")
	ready := apimeta.FindStatusCondition(stuck.Conditions, status.ConditionReady)
	if ready == nil || ready.Reason != status.ReasonSuperseded || !strings.Contains(ready.Message, "superseded by "+status.ShortRevision(fix)) ||
		!strings.Contains(ready.Message, "Deployment/"+ns+"/stuck") || status.UnitFailing(*stuck) || status.UnitReady(*stuck) {
		t.Errorf("unit stuck: %+v, want Superseded by %s naming its Deployment, neither Ready nor failing", stuck.Conditions, fix)
	}
	other := unitStatus(r.st, "other")
	if ready := apimeta.FindStatusCondition(other.Conditions, status.ConditionReady); ready == nil || ready.Reason != status.ReasonProgressing ||
		!strings.Contains(ready.Message, "the wait goes on") || status.UnitFailing(*other) {
		t.Errorf("unit other: %+v, want still waiting", other.Conditions)
	}
	if got := readyReason(unitStatus(r.st, "settled")); got != "True/"+status.ReasonSucceeded {
		t.Errorf("unit settled: %s", got)
	}
	if r.st.DesiredRevision != fix {
		t.Errorf("desired revision %s, want the newer %s", r.st.DesiredRevision, fix)
	}

	// The next cycle, at the fix: other is unchanged and waited for again
	// (Applier.WaitReady); a revision that changes it ends that wait too.
	done = e.cycleWaiting(ns, "stuck", "other")
	// Stuck carries the fix: this cycle reconciles the fix, not what is
	// pushed next.
	deadline := time.Now().Add(time.Minute)
	for {
		var d appsv1.Deployment
		if err := e.k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "stuck"}, &d); err == nil && d.Spec.Template.Spec.Containers[0].Image == "stuck:2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second cycle did not apply the fix")
		}
		time.Sleep(100 * time.Millisecond)
	}
	again := "main@sha1:" + e.push([]unit{configMapUnit("settled", ns, "1"), deploymentUnit("stuck", ns, "stuck:2"), deploymentUnit("other", ns, "other:2")})
	r = endedBy(t, done, again)
	other = unitStatus(r.st, "other")
	if ready := apimeta.FindStatusCondition(other.Conditions, status.ConditionReady); ready == nil || ready.Reason != status.ReasonSuperseded ||
		!strings.Contains(ready.Message, "superseded by "+status.ShortRevision(again)) {
		t.Errorf("unit other, waited for unchanged: %+v, want Superseded by %s", other.Conditions, again)
	}
}

// endedBy is the result of the cycle done, which the push of revision
// must end within minutes (its units wait for an hour).
func endedBy(t *testing.T, done <-chan cycleResult, revision string) cycleResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(2 * time.Minute):
		t.Fatalf("the cycle went on waiting after %s was pushed", revision)
		return cycleResult{}
	}
}

type cycleResult struct {
	st  *status.ClusterStatus
	err error
}

// cycleWaiting starts a cycle and returns once the named Deployments of
// ns are applied, so that the cycle waits for them.
func (e *env) cycleWaiting(ns string, deployments ...string) <-chan cycleResult {
	e.t.Helper()
	done := make(chan cycleResult, 1)
	go func() {
		st, err := e.cycle()
		done <- cycleResult{st, err}
	}()
	deadline := time.Now().Add(time.Minute)
	for _, d := range deployments {
		for {
			if err := e.k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: d}, &appsv1.Deployment{}); err == nil {
				break
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("Deployment %s not applied", d)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return done
}

// TestLoopRefusedRevisionDoesNotEndWaits: a newer revision the verifier
// refuses does not end a health wait (it is verified as any other); the
// accepted one pushed after it does, and the unit is Superseded by that
// one.
func TestLoopRefusedRevisionDoesNotEndWaits(t *testing.T) {
	const name = "refused-newer"
	ns := name + "-apps"
	units := func(image string) []unit { return []unit{deploymentUnit("stuck", ns, image)} }
	refusedSeen := make(chan struct{})
	var once sync.Once
	verifier := reconcile.VerifierFunc(func(_ context.Context, head gitrepo.Result) (*status.Verification, error) {
		s, err := os.ReadFile(filepath.Join(head.Dir, filepath.FromSlash(slice.UnitDir(name, "stuck")), "deploy.yaml"))
		if err != nil {
			return nil, err
		}
		if strings.Contains(string(s), "image: evil") {
			once.Do(func() { close(refusedSeen) })
			return &status.Verification{Mode: "test", Message: "untrusted"}, errors.New("signed by an untrusted key")
		}
		return &status.Verification{Mode: "test", Verified: true, Signer: "tester"}, nil
	})
	e := newEnv(t, name, units("stuck:1"), verifier)
	done := e.cycleWaiting(ns, "stuck")
	bad := e.push(units("evil"))
	select {
	case <-refusedSeen:
	case r := <-done:
		t.Fatalf("the cycle ended before the refused revision %s was verified: %v", bad, r.err)
	case <-time.After(time.Minute):
		t.Fatalf("the refused revision %s was never verified during the wait", bad)
	}
	fix := "main@sha1:" + e.push(units("stuck:2"))
	r := endedBy(t, done, fix)
	ready := apimeta.FindStatusCondition(unitStatus(r.st, "stuck").Conditions, status.ConditionReady)
	if ready == nil || ready.Reason != status.ReasonSuperseded || !strings.Contains(ready.Message, "superseded by "+status.ShortRevision(fix)) {
		t.Fatalf("unit stuck: %+v, want Superseded by %s, not by the refused %s", ready, fix, bad)
	}
}
