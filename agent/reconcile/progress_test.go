package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// recorder is a status sink keeping every document published.
type recorder struct {
	mu   sync.Mutex
	docs []*status.ClusterStatus
}

func (r *recorder) Publish(_ context.Context, st *status.ClusterStatus) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.docs = append(r.docs, st.DeepCopy())
	return nil
}

func (r *recorder) all() []*status.ClusterStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*status.ClusterStatus(nil), r.docs...)
}

// slowUnit is a Deployment that never becomes Ready in the minimal
// cluster (no controllers): its health wait lasts the unit's timeout.
func slowUnit(ns string) unit {
	return unit{name: "slow", wait: true, files: map[string]string{
		"kustomization.yaml": "resources:\n  - deploy.yaml\n",
		"deploy.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: slow
  namespace: %s
spec:
  selector:
    matchLabels: {app: slow}
  template:
    metadata:
      labels: {app: slow}
    spec:
      containers:
        - name: main
          image: nginx:1.27
`, ns),
	}}
}

// TestLoopHeartbeatsDuringALongCycle: while a unit's health wait runs, the
// loop publishes the last cycle's result with the running cycle's progress
// (the unit waited for), and the cycle's own result comes last, without
// progress.
func TestLoopHeartbeatsDuringALongCycle(t *testing.T) {
	e := newEnv(t, "progress", []unit{configMapUnit("fast", "progress-apps", "1")}, nil)
	rec := &recorder{}
	loop, err := reconcile.New(reconcile.Config{
		Cluster: e.name,
		Source: &gitrepo.Source{URL: e.url, Auth: gitrepo.Auth{Username: gitserver.Maintainer, Password: e.srv.Password(gitserver.Maintainer)},
			CacheDir: t.TempDir(), Timeout: 10 * time.Second},
		Applier: e.applier, Interval: time.Second, Workers: 4,
		Sink: rec, Heartbeat: 400 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := loop.Cycle(ctx)
	if err != nil || len(first.Units) != 1 {
		t.Fatalf("first cycle: %v, %+v", err, first)
	}

	e.push([]unit{configMapUnit("fast", "progress-apps", "1"), slowUnit(e.ns)})
	second, err := loop.Cycle(ctx)
	if err != nil {
		t.Fatalf("second cycle: %v", err)
	}
	if u := unitStatus(second, "slow"); u == nil || readyReason(u) != "False/"+status.ReasonHealthCheckFailed {
		t.Fatalf("the slow unit should have waited for health and failed it: %+v", second.Units)
	}

	docs := rec.all()
	if last := docs[len(docs)-1]; last.Progress != nil || unitStatus(last, "slow") == nil {
		t.Fatalf("the last document published is not the second cycle's result: progress %v, %d units", last.Progress, len(last.Units))
	}
	waiting := 0
	for _, d := range docs[1 : len(docs)-1] {
		if d.Progress == nil {
			t.Fatalf("a document published during a cycle has no progress")
		}
		if len(d.Units) != 1 || d.Units[0].Name != "fast" {
			t.Fatalf("a progress document is not based on the last result: units %+v", d.Units)
		}
		for _, u := range d.Progress.Units {
			if u.Name == "slow" {
				waiting++
			}
		}
	}
	if waiting == 0 {
		t.Fatalf("no progress document names the slow unit; %d documents", len(docs))
	}
	t.Logf("%d progress documents named the slow unit", waiting)
}
