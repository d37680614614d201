package apply_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/apply"
)

func TestCheckWithoutRender(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "check")
	ns := "check-app"
	u := apply.UnitRequest{Name: "web", Revision: "main@sha1:1", Hash: "sha256:1", Objects: parse(t, fmt.Sprintf(webV1, ns)), Prune: true}

	c, err := f.a.Check(ctx(t), "web", nil)
	if err != nil || c.Exists || c.UpToDate("sha256:1", true) {
		t.Fatalf("before apply: %+v, %v", c, err)
	}
	f.apply(u)

	for _, restarted := range []bool{false, true} {
		if restarted {
			f.a = f.newApplier()
		}
		var obs *apply.Observation
		if restarted {
			if obs, err = f.a.Observe(ctx(t)); err != nil {
				t.Fatal(err)
			}
		}
		f.counter.Reset()
		c, err = f.a.Check(ctx(t), "web", obs)
		if err != nil {
			t.Fatal(err)
		}
		if !c.UpToDate("sha256:1", true) || c.ManagedObjects != 6 || c.Revision != "main@sha1:1" {
			t.Fatalf("restarted=%v: %+v", restarted, c)
		}
		if c.UpToDate("sha256:2", true) || c.UpToDate("sha256:1", false) {
			t.Fatalf("restarted=%v: a new hash or prune flag must not be up to date", restarted)
		}
		if f.counter.Writes() != 0 || f.counter.DryRuns() != 0 {
			t.Fatalf("check wrote: %d writes, %d dry-runs", f.counter.Writes(), f.counter.DryRuns())
		}
	}

	// Another manager changes a field flotilla applied: drift.
	cm := &corev1.ConfigMap{}
	if err := f.k.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "web-config"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["color"] = "red"
	if err := f.k.Update(ctx(t), cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	c, err = f.a.Check(ctx(t), "web", nil)
	if err != nil || c.UpToDate("sha256:1", true) || len(c.Drifted) != 1 || c.Drifted[0] != "ConfigMap/"+ns+"/web-config" {
		t.Fatalf("after edit: %+v, %v", c, err)
	}

	// A deleted object is drift too.
	svc := &corev1.Service{}
	svc.Namespace, svc.Name = ns, "web"
	if err := f.k.Delete(ctx(t), svc); err != nil {
		t.Fatal(err)
	}
	c, err = f.a.Check(ctx(t), "web", nil)
	if err != nil || len(c.Drifted) != 2 {
		t.Fatalf("after delete: %+v, %v", c, err)
	}

	// Apply corrects both; the unit is up to date again.
	res := f.apply(u)
	if res.DriftCorrected != 2 {
		t.Fatalf("drift corrected: %+v", res)
	}
	if c, err = f.a.Check(ctx(t), "web", nil); err != nil || !c.UpToDate("sha256:1", true) {
		t.Fatalf("after correction: %+v, %v", c, err)
	}
}
