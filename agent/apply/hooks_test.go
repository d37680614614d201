package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/agent/apply"
)

// TestHooks: hooks run once per unit hash (install, then upgrade), are not
// inventory objects, honour their delete policies, and a failed pre hook
// applies nothing and is reported again without running. ConfigMap hooks
// are done once created (as in Helm); Jobs are covered by test/e2e.
func TestHooks(t *testing.T) {
	t.Parallel()
	c := minimalCluster(t)
	f := newFixture(t, c, "hooks")
	ns := "hooks-app"
	if err := c.CreateNamespace(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	cm := func(name, value string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: {v: %q}\n", name, ns, value)
	}
	hook := func(name, value string, events []string, policies ...string) apply.Hook {
		if len(policies) == 0 {
			policies = []string{apply.HookBeforeCreation}
		}
		return apply.Hook{Object: parse(t, cm(name, value))[0], Events: events, DeletePolicies: policies}
	}
	request := func(hash, value string) apply.UnitRequest {
		return apply.UnitRequest{
			Name: "hooked", Hash: hash, Prune: true, Objects: parse(t, cm("app", value)),
			Hooks: []apply.Hook{
				hook("migrate", value, []string{apply.HookPreInstall, apply.HookPreUpgrade}),
				hook("upgraded", value, []string{apply.HookPreUpgrade}),
				hook("notify", value, []string{apply.HookPostInstall, apply.HookPostUpgrade}, apply.HookSucceeded),
			},
		}
	}
	value := func(name string) string {
		t.Helper()
		o, err := f.tryGet("v1", "ConfigMap", ns, name)
		if apierrors.IsNotFound(err) {
			return "absent"
		}
		if err != nil {
			t.Fatal(err)
		}
		v, _ := o.Object["data"].(map[string]any)["v"].(string)
		return v
	}

	// Install: pre-install hooks, not pre-upgrade ones; the post hook
	// ran and was deleted (hook-succeeded).
	res := f.apply(request("h1", "1"))
	if res.ManagedObjects != 1 || !res.Ready {
		t.Fatalf("install: %+v", res)
	}
	if got := value("migrate") + value("upgraded") + value("notify") + value("app"); got != "1absentabsent1" {
		t.Fatalf("after install, migrate/upgraded/notify/app = %q", got)
	}
	inv, err := f.a.Inventory(ctx(t), "hooked")
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Entries) != 1 || inv.Hooks.Hash != "h1" || !inv.Hooks.Install {
		t.Fatalf("inventory: %+v", inv)
	}
	if chk, err := f.a.Check(ctx(t), "hooked", nil); err != nil || !chk.UpToDate("h1", true) {
		t.Fatalf("check after install: %+v %v", chk, err)
	}

	// The same hash again, from a restarted agent: no hook runs and,
	// with no drift, no write.
	if err := f.k.Delete(ctx(t), &corev1.ConfigMap{ObjectMeta: metaOf(ns, "migrate")}); err != nil {
		t.Fatal(err)
	}
	f.a = f.newApplier()
	f.counter.Reset()
	if res := f.apply(request("h1", "1")); !res.Skipped {
		t.Fatalf("same hash: %+v", res)
	}
	if value("migrate") != "absent" || f.counter.Writes() != 0 {
		t.Fatalf("same hash re-ran hooks: migrate=%s, %d writes", value("migrate"), f.counter.Writes())
	}

	// Upgrade: pre-upgrade hooks (before-hook-creation recreates them).
	f.apply(request("h2", "2"))
	if got := value("migrate") + value("upgraded") + value("notify") + value("app"); got != "22absent2" {
		t.Fatalf("after upgrade, migrate/upgraded/notify/app = %q", got)
	}

	// A pre hook that cannot be created fails the unit: nothing applied,
	// the failure names the hook and is reported again without running.
	bad := request("h3", "3")
	bad.Hooks[0].Object.SetNamespace("no-such-namespace")
	_, err = f.a.Apply(ctx(t), bad)
	if !errors.Is(err, apply.ErrHook) || !strings.Contains(err.Error(), "pre-upgrade hook ConfigMap/no-such-namespace/migrate") {
		t.Fatalf("failed pre hook: %v", err)
	}
	if value("app") != "2" || value("upgraded") != "2" {
		t.Fatalf("unit applied past a failed pre hook: app=%s upgraded=%s", value("app"), value("upgraded"))
	}
	if err := c.CreateNamespace(ctx(t), "no-such-namespace"); err != nil {
		t.Fatal(err)
	}
	_, err = f.a.Apply(ctx(t), bad)
	if !errors.Is(err, apply.ErrHook) {
		t.Fatalf("same hash after a failed hook: %v, want the recorded failure", err)
	}
	if _, err := f.tryGet("v1", "ConfigMap", "no-such-namespace", "migrate"); !apierrors.IsNotFound(err) {
		t.Fatalf("a failed hook re-ran at the same hash: %v", err)
	}
	if chk, err := f.a.Check(ctx(t), "hooked", nil); err != nil || chk.UpToDate("h3", true) {
		t.Fatalf("check after failed hook: %+v %v", chk, err)
	}

	// Hooks never enter the inventory, so they are neither drift nor pruned.
	inv, err = f.a.Inventory(ctx(t), "hooked")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range inv.Entries {
		if e.ID.Name != "app" {
			t.Errorf("inventory holds %s", e.Subject())
		}
	}
}

func metaOf(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// TestHookInterruptedOrTimedOut: a Job hook that never finishes (no job
// controller in the minimal cluster) fails the unit once the unit's timeout
// passes, and that is recorded; an apply interrupted by its context is not
// a verdict, so nothing is recorded and the hook runs again next time.
func TestHookInterruptedOrTimedOut(t *testing.T) {
	t.Parallel()
	c := minimalCluster(t)
	f := newFixture(t, c, "hookwait")
	ns := "hookwait-app"
	if err := c.CreateNamespace(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	job := parse(t, fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: %s}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: m, image: registry.example/migrate:1}]
`, ns))[0]
	u := apply.UnitRequest{
		Name: "waits", Hash: "h1", Objects: parse(t, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: %s}\n", ns)),
		Hooks: []apply.Hook{{Object: job, Events: []string{apply.HookPreInstall}, DeletePolicies: []string{apply.HookBeforeCreation}}},
	}

	short, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	if _, err := f.a.Apply(short, u); err == nil {
		t.Fatal("apply with a hook that never finishes succeeded")
	}
	if _, err := f.a.Inventory(ctx(t), "waits"); !errors.Is(err, apply.ErrNoInventory) {
		t.Fatalf("an interrupted hook was recorded: %v", err)
	}

	u.Timeout = time.Second
	_, err := f.a.Apply(ctx(t), u)
	if !errors.Is(err, apply.ErrHook) || !strings.Contains(err.Error(), "pre-install hook Job/"+ns+"/migrate") || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("hook past the unit's timeout: %v", err)
	}
	inv, err := f.a.Inventory(ctx(t), "waits")
	if err != nil || inv.Hooks.Hash != "h1" || len(inv.Entries) != 0 {
		t.Fatalf("inventory after a timed-out hook: %+v %v", inv, err)
	}
	if _, err := f.tryGet("v1", "ConfigMap", ns, "app"); !apierrors.IsNotFound(err) {
		t.Fatalf("unit applied past a timed-out pre hook: %v", err)
	}
}
