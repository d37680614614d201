package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/agent/volcano"
	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// volcanoNodes: per Volcano cluster 4 GPUs on two nodes, plus a CPU node.
func volcanoNodes() []testenv.NodeSpec {
	nodes := testenv.GPUNodes("gpu", 2, 2)
	return append(nodes, testenv.Nodes("cpu", 1, testenv.NodeSpec{CPU: "16", Memory: "64Gi"})...)
}

// jobAgent is an agent loop with Volcano, in process, committing its
// status to the Git server like the binary does.
type jobAgent struct {
	t    *testing.T
	name string
	loop *reconcile.Loop
	logs *agentproc.Buffer
}

type jobAgentSpec struct {
	name      string
	cluster   *testenv.Cluster
	srv       *gitserver.Server
	repo      string
	namespace string // inventories
	retention time.Duration
}

func startJobAgent(t *testing.T, spec jobAgentSpec) *jobAgent {
	t.Helper()
	creds := agentUser(t, spec.srv, spec.name)
	auth, err := gitrepo.LoadAuth(creds)
	if err != nil {
		t.Fatal(err)
	}
	cfg := spec.cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 100, 200
	w, err := statuswriter.NewWriter(statuswriter.WriterOptions{
		Cluster: spec.name, URL: spec.srv.URL(spec.repo), Auth: auth, Timeout: 20 * time.Second,
		RetryBackoff: gitrepo.Backoff{Initial: 200 * time.Millisecond, Max: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	ag := agentproc.NewInProcess(t, spec.cluster, agentproc.InProcessOptions{
		Cluster: spec.name, RepoURL: spec.srv.URL(spec.repo), Auth: auth,
		Namespace: spec.namespace, RESTConfig: cfg,
		Volcano: func(applier *apply.Applier) (reconcile.Volcano, error) {
			return volcano.NewManager(cfg, volcano.Options{Applier: applier, CompletedRetention: spec.retention, DeleteWait: 30 * time.Second})
		},
		Sink: w, Alongside: []func(context.Context) error{w.Run},
		Interval: 2 * time.Second, FetchTimeout: 20 * time.Second,
		Identity: spec.name + "-agent", LogTail: 80,
	})
	ag.Start()
	return &jobAgent{t: t, name: spec.name, loop: ag.Loop, logs: ag.Logs}
}

// waitStatus polls the loop's last status document until cond holds.
func (a *jobAgent) waitStatus(timeout time.Duration, what string, cond func(*status.ClusterStatus) bool) *status.ClusterStatus {
	a.t.Helper()
	var last *status.ClusterStatus
	waitFor(a.t, timeout, a.name+": "+what, func() (bool, string) {
		last = a.loop.Status()
		if last == nil {
			return false, "no status yet"
		}
		return cond(last), describeStatus(last) + describeJobs(last)
	})
	return last
}

// cycleRenders lists, per cycle so far, how many units the agent
// rendered, from its "cycle finished" log lines.
func (a *jobAgent) cycleRenders() []int {
	var counts []int
	for _, line := range strings.Split(a.logs.String(), "\n") {
		var rec struct {
			Msg      string `json:"msg"`
			Rendered int    `json:"rendered"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "cycle finished" {
			counts = append(counts, rec.Rendered)
		}
	}
	return counts
}

// rendersOverNextCycles waits for n more cycles and returns how many units
// they rendered.
func (a *jobAgent) rendersOverNextCycles(n int) int {
	a.t.Helper()
	mark := len(a.cycleRenders())
	var counts []int
	waitFor(a.t, time.Minute, fmt.Sprintf("%s: %d more cycles", a.name, n), func() (bool, string) {
		counts = a.cycleRenders()
		return len(counts) >= mark+n, fmt.Sprintf("%d cycles", len(counts))
	})
	sum := 0
	for _, c := range counts[mark : mark+n] {
		sum += c
	}
	return sum
}

func describeJobs(st *status.ClusterStatus) string {
	var b strings.Builder
	for _, j := range st.Jobs {
		fmt.Fprintf(&b, "  job %s/%s phase=%s pg=%s run=%d ok=%d fail=%d preflight=%s msg=%q\n",
			j.Namespace, j.Name, j.Phase, j.PodGroupPhase, j.Running, j.Succeeded, j.Failed, j.Preflight, j.Message)
	}
	if c := st.Capacity; c != nil {
		fmt.Fprintf(&b, "  capacity nodes=%d allocatable=%v free=%v\n", c.ReadyNodes, c.Allocatable, c.Free)
	}
	return b.String()
}

func jobOf(st *status.ClusterStatus, name string) *status.JobStatus {
	for i := range st.Jobs {
		if st.Jobs[i].Name == name {
			return &st.Jobs[i]
		}
	}
	return nil
}

func unitReason(u *status.UnitStatus) string {
	if u == nil {
		return ""
	}
	if c := condOf(u.Conditions, status.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// hub runs the flotilla CLI in process and returns its output.
func hub(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, stderr, err := hubOutput(t, args...)
	if stderr != "" {
		t.Logf("flotilla %s: stderr:\n%s", strings.Join(args, " "), stderr)
	}
	return out, err
}

// hubOutput runs the flotilla CLI in process.
func hubOutput(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := hubcmd.NewRootCommand()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err = root.ExecuteContext(testCtx(t))
	return out.String(), errb.String(), err
}

// statusJobs runs `flotilla status jobs -o json` against the Git server.
func statusJobs(t *testing.T, srv *gitserver.Server, repo, creds, cache string) (*fleetview.JobsView, error) {
	t.Helper()
	out, err := hub(t, "status", "jobs", "--repo", srv.URL(repo), "--git-credentials-dir", creds, "--cache-dir", cache, "-o", "json")
	if err != nil {
		return nil, err
	}
	v := &fleetview.JobsView{}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return nil, fmt.Errorf("decode %q: %w", out, err)
	}
	return v, nil
}

func rowOf(v *fleetview.JobsView, cluster, name string) *fleetview.JobRow {
	for i := range v.Jobs {
		if v.Jobs[i].Cluster == cluster && v.Jobs[i].Name == name {
			return &v.Jobs[i]
		}
	}
	return nil
}

// ---- cluster reads ----

func vcJob(t *testing.T, c *testenv.Cluster, ns, name string) *batchv1alpha1.Job {
	t.Helper()
	j := &batchv1alpha1.Job{}
	if err := c.Client().Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return j
}

func vcJobPods(t *testing.T, c *testenv.Cluster, ns, job string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := c.Client().List(testCtx(t), &pods, client.InNamespace(ns), client.MatchingLabels{batchv1alpha1.JobNameKey: job}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func podGroups(t *testing.T, c *testenv.Cluster, ns string) []schedulingv1beta1.PodGroup {
	t.Helper()
	var pgs schedulingv1beta1.PodGroupList
	if err := c.Client().List(testCtx(t), &pgs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return pgs.Items
}
