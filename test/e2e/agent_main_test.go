package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
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

	binOnce sync.Once
	bin     string
	binErr  error
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

// agentBinary is bin/flotilla-agent (`make build`) when it is newer than
// every Go file of the packages it is built from; otherwise (or with
// FLOTILLA_AGENT_BIN unset and bin/ stale) a build into the user cache
// directory, which go build leaves alone when it is up to date. A stale
// binary never fakes a result.
func agentBinary(t *testing.T) string {
	t.Helper()
	agentShared.binOnce.Do(func() {
		if bin := os.Getenv("FLOTILLA_AGENT_BIN"); bin != "" {
			agentShared.bin = bin
			return
		}
		root := moduleRootDir()
		bin := filepath.Join(root, "bin", "flotilla-agent")
		if fi, err := os.Stat(bin); err == nil {
			if newer, err := depsNewerThan(root, fi.ModTime()); err == nil && !newer {
				agentShared.bin = bin
				return
			}
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		out := filepath.Join(cache, "flotilla", "e2e", "flotilla-agent")
		cmd := exec.Command("go", "build", "-o", out, "./agent/flotilla-agent")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			agentShared.binErr = fmt.Errorf("go build ./agent/flotilla-agent: %v\n%s", err, b)
			return
		}
		agentShared.bin = out
	})
	if agentShared.binErr != nil {
		t.Fatal(agentShared.binErr)
	}
	t.Logf("agent binary %s", agentShared.bin)
	return agentShared.bin
}

// depsNewerThan reports a non-test Go file of the agent's module
// dependencies, or go.mod, modified after t.
func depsNewerThan(root string, t time.Time) (bool, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{end}}{{end}}", "./agent/flotilla-agent")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return false, err
	}
	files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for _, f := range fields[1:] {
			files = append(files, filepath.Join(fields[0], f))
		}
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.ModTime().After(t) {
			return true, nil
		}
	}
	return false, nil
}

func moduleRootDir() string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
