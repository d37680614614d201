package smoke_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// One Full cluster with Volcano serves every Kubernetes smoke test; it starts
// on first use, so running only non-cluster tests (-run Git) costs nothing.
var shared struct {
	once    sync.Once
	cluster *testenv.Cluster
	err     error
}

// Fake nodes of the shared cluster: 4 GPUs in total (the over-sized gang
// needs 8), plus a tainted node nothing in the tests tolerates.
const (
	gpuNodes    = 2
	gpusPerNode = 2
	taintedNode = "tainted-0"
)

var infraTaint = corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}

func sharedNodes() []testenv.NodeSpec {
	nodes := testenv.GPUNodes("gpu", gpuNodes, gpusPerNode)
	nodes = append(nodes, testenv.Nodes("cpu", 1, testenv.NodeSpec{CPU: "16", Memory: "64Gi"})...)
	return append(nodes, testenv.Nodes("tainted", 1, testenv.NodeSpec{Taints: []corev1.Taint{infraTaint}})...)
}

// sharedCluster returns the suite's cluster, failing the test (with the
// "run `make tools`" hint when binaries are missing) if it cannot start.
func sharedCluster(t *testing.T) *testenv.Cluster {
	t.Helper()
	testenv.NeedsCluster(t)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.StartTimeout)
		defer cancel()
		shared.cluster, shared.err = testenv.New(ctx, "smoke", "", testenv.ClusterOptions{
			Mode:    testenv.Full,
			Volcano: true,
			Nodes:   sharedNodes(),
		})
		if shared.err == nil {
			t.Logf("full cluster with Volcano and %d nodes ready in %s (%s)", len(sharedNodes()),
				shared.cluster.StartDuration().Round(time.Millisecond), timings(shared.cluster))
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.cluster
}

func timings(c *testenv.Cluster) string {
	s := ""
	for i, tm := range c.Timings() {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %s", tm.Phase, tm.Duration.Round(time.Millisecond))
	}
	return s
}

func TestMain(m *testing.M) {
	code := m.Run()
	if c := shared.cluster; c != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "smoke cluster component logs:\n%s\n", c.LogTails(60))
		}
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop smoke cluster:", err)
			code = 1
		}
	}
	os.Exit(code)
}
