package demo_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/fleetstatus"
	"github.com/flotilla-gitops/flotilla/test/demo"
)

// TestDemo is `make demo`'s scenario: the template fleet, pushed to a local
// Git server, gets in sync on three full clusters through their agents;
// `flotilla status` shows it; stopping leaves no process behind.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three full clusters")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	f, err := demo.Start(ctx, demo.Options{Out: &out, Interval: 20 * time.Second})
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out.String())
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = f.Stop()
		}
	}()
	view, err := f.WaitInSync(ctx, 10*time.Minute)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, out.String())
	}
	for _, c := range view.Clusters {
		if c.State != fleetstatus.StateInSync || c.UnitsTotal == 0 || c.UnitsReady != c.UnitsTotal || c.AppliedRevision == "" {
			t.Errorf("cluster %s: %+v", c.Name, c)
		}
	}
	table, err := f.StatusTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range demo.Clusters {
		if !strings.Contains(table, name) {
			t.Errorf("status table lacks %s:\n%s", name, table)
		}
	}
	if got := strings.Count(table, string(fleetstatus.StateInSync)); got < len(demo.Clusters) {
		t.Errorf("status table shows %d InSync, want %d:\n%s", got, len(demo.Clusters), table)
	}
	t.Logf("progress:\n%s\n%s", out.String(), table)

	// What the demo tells the user to try: edit, render, plan, push.
	app := filepath.Join(f.CloneDir, "apps", "nginx", "app.yaml")
	b, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "replicas: 4", "replicas: 8", 1)
	if edited == string(b) {
		t.Fatal("apps/nginx/app.yaml has no \"replicas: 4\" to edit")
	}
	if err := os.WriteFile(app, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Run(ctx, f.CloneDir, f.Flotilla(), "render"); err != nil {
		t.Fatal(err)
	}
	plan, err := f.Run(ctx, f.CloneDir, f.Flotilla(), "plan", "--base", "origin/main")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("flotilla plan: want exit 1 (changes), got %v\n%s", err, plan)
	}
	if !strings.Contains(plan, "member1 3→6") || !strings.Contains(plan, "member2 1→2") {
		t.Errorf("plan does not say the new division in words:\n%s", plan)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "Scale nginx"}, {"push", "-q"}} {
		if _, err := f.Run(ctx, f.CloneDir, "git", args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.WaitInSync(ctx, 5*time.Minute); err != nil {
		t.Fatalf("after the push: %v\n%s", err, out.String())
	}
	for name, want := range map[string]int32{"member1": 6, "member2": 2} {
		d := &appsv1.Deployment{}
		if err := f.Cluster(name).Client().Get(ctx, client.ObjectKey{Namespace: "web", Name: "nginx"}, d); err != nil {
			t.Fatal(err)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != want || d.Status.AvailableReplicas != want {
			t.Errorf("%s: nginx has %v replicas, %d available; want %d", name, d.Spec.Replicas, d.Status.AvailableReplicas, want)
		}
	}

	pids := f.PIDs()
	if len(pids) < 3*6 {
		t.Errorf("%d processes, want an agent and at least 5 components per cluster", len(pids))
	}
	stopped = true
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		// Signal 0 probes: only a process that still exists (not a zombie
		// reaped by us) accepts it.
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still runs after Stop", pid)
		}
	}
}
