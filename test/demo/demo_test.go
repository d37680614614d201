package demo_test

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/status"
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
		if c.State != status.StateInSync || c.UnitsTotal == 0 || c.UnitsReady != c.UnitsTotal || c.AppliedRevision == "" {
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
	if got := strings.Count(table, string(status.StateInSync)); got < len(demo.Clusters) {
		t.Errorf("status table shows %d InSync, want %d:\n%s", got, len(demo.Clusters), table)
	}
	t.Logf("progress:\n%s\n%s", out.String(), table)

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
