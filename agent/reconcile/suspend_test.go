package reconcile_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// TestLoopSuspendedUnit: a suspended unit is neither applied nor pruned
// and costs no API write; it reports Suspended with its last applied
// revision, its dependents go on while its objects are Ready, and it does
// not hold back the cluster's applied revision. One suspended before it
// was ever applied creates nothing and blocks its dependents.
func TestLoopSuspendedUnit(t *testing.T) {
	const ns = "suspend-apps"
	a := func(value string, suspend bool) unit {
		u := configMapUnit("a", ns, value)
		u.suspend = suspend
		return u
	}
	dependent := func(value string) unit {
		u := configMapUnit("dependent", ns, value)
		u.dependsOn = []string{"a"}
		return u
	}
	e := newEnv(t, "suspend", []unit{a("1", false), dependent("1")}, nil)
	st, err := e.cycle()
	if err != nil {
		t.Fatal(err)
	}
	rev1 := st.AppliedRevision
	hash1 := unitStatus(st, "a").Hash

	// Suspended, with a change: a keeps 1, the dependent is applied.
	rev2 := e.push([]unit{a("2", true), dependent("2")})
	st, err = e.cycle()
	if err != nil {
		t.Fatal(err)
	}
	u := unitStatus(st, "a")
	if u == nil || !u.Suspended || readyReason(u) != "True/"+status.ReasonSuspended || u.AppliedRevision != rev1 || u.Hash != hash1 {
		t.Fatalf("suspended unit: %+v", u)
	}
	if v, _ := e.value("a"); v != "1" {
		t.Errorf("a = %q while suspended, want 1", v)
	}
	if v, _ := e.value("dependent"); v != "2" {
		t.Errorf("dependent = %q, want 2 (a's objects are Ready)", v)
	}
	if !strings.HasSuffix(st.AppliedRevision, rev2) {
		t.Errorf("cluster applied revision %q, want %s: a suspended unit does not hold it back", st.AppliedRevision, rev2)
	}
	e.counter.Reset()
	if st, err = e.cycle(); err != nil || !unitStatus(st, "a").Suspended {
		t.Fatalf("second suspended cycle: %v", err)
	}
	if w := e.counter.Writes(); w != 0 {
		t.Errorf("%d API writes in a cycle with nothing but a suspended change", w)
	}

	// Removed from the source while suspended: not pruned.
	e.push([]unit{{name: "a", suspend: true, allowEmpty: true, files: map[string]string{"kustomization.yaml": "resources: []\n"}}, dependent("2")})
	if _, err := e.cycle(); err != nil {
		t.Fatal(err)
	}
	if v, err := e.value("a"); err != nil || v != "1" {
		t.Errorf("a after leaving its suspended source: %q %v, want 1 kept", v, err)
	}

	// Resumed: applied.
	rev4 := e.push([]unit{a("4", false), dependent("2")})
	st, err = e.cycle()
	if err != nil {
		t.Fatal(err)
	}
	if u := unitStatus(st, "a"); u.Suspended || readyReason(u) != "True/"+status.ReasonSucceeded || !strings.HasSuffix(u.AppliedRevision, rev4) {
		t.Errorf("resumed unit: %+v", u)
	}
	if v, _ := e.value("a"); v != "4" {
		t.Errorf("a = %q after resuming, want 4", v)
	}

	// Suspended before it was ever applied: nothing, and its dependent waits.
	fresh := configMapUnit("fresh", ns, "1")
	fresh.suspend = true
	after := configMapUnit("after", ns, "1")
	after.dependsOn = []string{"fresh"}
	e.push([]unit{a("4", false), dependent("2"), fresh, after})
	st, err = e.cycle()
	if err != nil {
		t.Fatal(err)
	}
	if r := readyReason(unitStatus(st, "fresh")); r != "False/"+status.ReasonSuspended {
		t.Errorf("fresh: %s", r)
	}
	if r := readyReason(unitStatus(st, "after")); r != "False/"+status.ReasonDependencyNotReady {
		t.Errorf("after: %s", r)
	}
	if _, err := e.value("fresh"); !apierrors.IsNotFound(err) {
		t.Errorf("a suspended unit was created: %v", err)
	}
}
