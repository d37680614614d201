package e2e_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/test/cijob"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// The agent's end-to-end tests share one Full cluster (kube-controller-
// manager, scheduler, kwok nodes) and one Git server, both started on first
// use; every test works in namespaces and repositories of its own. A test
// run again (go test -count=N) gets a cluster of its own for each run: what
// the run before left in its namespaces (objects, the agent's trust state)
// would change what it sees. Repositories are removed when a test ends.
var agentClusters = &testenv.Shared{Name: "agent-e2e", PerRun: true, Options: testenv.ClusterOptions{Mode: testenv.Full, Nodes: agentNodes()}}

var agentShared struct {
	gitOnce sync.Once
	git     *gitserver.Server
	gitErr  error
	gitDir  string
}

func TestMain(m *testing.M) {
	// Helm templates render in worker processes that re-execute this test
	// binary: serve and exit when started as one.
	render.ServeWorkerIfRequested()
	// The template's CI jobs run this binary as `flotilla`.
	cijob.ServeCLIIfRequested(hubcmd.Execute)
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	agentClusters.Close(code)
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
	return agentClusters.Get(t)
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
