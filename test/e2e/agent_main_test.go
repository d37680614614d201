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
var agentShared struct {
	mu       sync.Mutex
	seen     map[string]int     // runs of each test name so far
	runs     map[*testing.T]int // which run of its name each test is, from 0
	clusters []*sharedCluster   // by run

	gitOnce sync.Once
	git     *gitserver.Server
	gitErr  error
	gitDir  string
}

type sharedCluster struct {
	once    sync.Once
	cluster *testenv.Cluster
	err     error
}

func TestMain(m *testing.M) {
	// Helm templates render in worker processes that re-execute this test
	// binary: serve and exit when started as one.
	render.ServeWorkerIfRequested()
	// The template's CI jobs run this binary as `flotilla`.
	cijob.ServeCLIIfRequested(hubcmd.Execute)
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	for _, sc := range agentShared.clusters {
		c := sc.cluster
		if c == nil {
			continue
		}
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

// sharedClusterOf is the shared cluster of t's run: the first run of every
// test shares one, the second run another, and so on.
func sharedClusterOf(t *testing.T) *sharedCluster {
	agentShared.mu.Lock()
	defer agentShared.mu.Unlock()
	if agentShared.runs == nil {
		agentShared.seen, agentShared.runs = map[string]int{}, map[*testing.T]int{}
	}
	run, ok := agentShared.runs[t]
	if !ok {
		run = agentShared.seen[t.Name()]
		agentShared.seen[t.Name()]++
		agentShared.runs[t] = run
	}
	for len(agentShared.clusters) <= run {
		agentShared.clusters = append(agentShared.clusters, &sharedCluster{})
	}
	return agentShared.clusters[run]
}

// agentNodes: room for every template Deployment's pods.
func agentNodes() []testenv.NodeSpec {
	return testenv.Nodes("kwok-node", 2, testenv.NodeSpec{CPU: "32", Memory: "128Gi", Pods: 200})
}

func agentCluster(t *testing.T) *testenv.Cluster {
	t.Helper()
	testenv.NeedsCluster(t)
	sc := sharedClusterOf(t)
	sc.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.StartTimeout)
		defer cancel()
		sc.cluster, sc.err = testenv.New(ctx, "agent-e2e", "", testenv.ClusterOptions{
			Mode: testenv.Full, Nodes: agentNodes(),
		})
		if sc.err == nil {
			t.Logf("full cluster ready in %s", sc.cluster.StartDuration().Round(time.Millisecond))
		}
	})
	if sc.err != nil {
		t.Fatal(sc.err)
	}
	return sc.cluster
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
