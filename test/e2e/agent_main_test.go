package e2e_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// The agent's end-to-end tests share one Full cluster (kube-controller-
// manager, scheduler, kwok nodes) and one Git server, both started on first
// use; every test works in namespaces and repositories of its own.
var agentShared struct {
	clusterOnce sync.Once
	cluster     *testenv.Cluster
	clusterErr  error

	gitOnce sync.Once
	git     *gitserver.Server
	gitErr  error
	gitDir  string
}

func TestMain(m *testing.M) {
	// Helm templates render in worker processes that re-execute this test
	// binary: serve and exit when started as one.
	render.ServeWorkerIfRequested()
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if c := agentShared.cluster; c != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "agent e2e cluster component logs:\n%s\n", c.LogTails(40))
		}
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop cluster:", err)
		}
	}
	if s := agentShared.git; s != nil {
		s.Close()
		os.RemoveAll(agentShared.gitDir)
	}
	os.Exit(code)
}

// agentNodes: room for every template Deployment's pods.
func agentNodes() []testenv.NodeSpec {
	return testenv.Nodes("kwok-node", 2, testenv.NodeSpec{CPU: "32", Memory: "128Gi", Pods: 200})
}

func agentCluster(t *testing.T) *testenv.Cluster {
	t.Helper()
	testenv.NeedsCluster(t)
	agentShared.clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.StartTimeout)
		defer cancel()
		agentShared.cluster, agentShared.clusterErr = testenv.New(ctx, "agent-e2e", "", testenv.ClusterOptions{
			Mode: testenv.Full, Nodes: agentNodes(),
		})
		if agentShared.clusterErr == nil {
			t.Logf("full cluster ready in %s", agentShared.cluster.StartDuration().Round(time.Millisecond))
		}
	})
	if agentShared.clusterErr != nil {
		t.Fatal(agentShared.clusterErr)
	}
	return agentShared.cluster
}

// agentGit is the shared Git server. Tests that stop the server start one
// of their own (newGitServer).
func agentGit(t *testing.T) *gitserver.Server {
	t.Helper()
	agentShared.gitOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agent-e2e-git-")
		if err != nil {
			agentShared.gitErr = err
			return
		}
		agentShared.gitDir = dir
		agentShared.git, agentShared.gitErr = gitserver.New(context.Background(), dir, gitserver.ForgeConfig())
	})
	if agentShared.gitErr != nil {
		t.Fatal(agentShared.gitErr)
	}
	return agentShared.git
}

func newGitServer(t *testing.T) *gitserver.Server {
	t.Helper()
	return gitserver.Start(t, gitserver.ForgeConfig())
}
