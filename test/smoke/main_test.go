package smoke_test

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-gitops/flotilla/test/testenv"
)

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

// One Full cluster with Volcano serves every Kubernetes smoke test; it starts
// on first use, so running only non-cluster tests (-run Git) costs nothing.
var shared = &testenv.Shared{Name: "smoke", Options: testenv.ClusterOptions{Mode: testenv.Full, Volcano: true, Nodes: sharedNodes()}}

// sharedCluster returns the suite's cluster.
func sharedCluster(t *testing.T) *testenv.Cluster {
	t.Helper()
	return shared.Get(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close(code)
	os.Exit(code)
}
