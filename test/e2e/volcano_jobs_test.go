package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/flotilla-gitops/flotilla/agent/volcano"
	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// The Volcano fleet: member1 and member2 run Volcano on 4 kwok GPUs each
// (their spec.capacity hints are equal, so only status can tell them
// apart); novolcano (the agent tests' shared cluster) has no Volcano. Fleet
// gpu holds the two Volcano clusters (namespace ml, queue research-queue);
// fleet all holds every cluster (namespace vc-e2e-apps, queue batch-queue,
// application hello).
const (
	vcRepo        = "vc-fleet"
	vcNoVolcano   = "novolcano"
	vcJobNS       = "ml"
	vcAppNS       = "vc-e2e-apps"
	vcPause       = "registry.k8s.io/pause:3.10"
	vcAgentNS     = "flotilla-system"
	vcNoVolcanoNS = "flotilla-vc-novolcano"
)

func vcCluster(name string, labels string) string {
	return fmt.Sprintf(`apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: %s
  labels: {%s}
spec:
  capacity: {cpu: "48", memory: 576Gi, nvidia.com/gpu: "4"}
`, name, labels)
}

func vcBaseFiles() map[string]string {
	return map[string]string{
		"clusters/member1.yaml":   vcCluster("member1", "gpu: \"true\""),
		"clusters/member2.yaml":   vcCluster("member2", "gpu: \"true\""),
		"clusters/novolcano.yaml": vcCluster(vcNoVolcano, "gpu: \"false\""),
		"fleets/gpu.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: gpu
spec:
  selector:
    matchLabels: {gpu: "true"}
  namespaces:
    - name: ml
  queues:
    - name: research-queue
      weight: 1
`,
		"fleets/all.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: all
spec:
  clusters: [member1, member2, novolcano]
  namespaces:
    - name: vc-e2e-apps
  queues:
    - name: batch-queue
      weight: 1
`,
		"apps/hello/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: hello
spec:
  namespace: vc-e2e-apps
  source:
    manifests:
      path: manifests
  syncPolicies:
    - destination: {fleet: all}
`,
		"apps/hello/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\ndata:\n  greeting: hello\n",
	}
}

// vcTask is a GlobalJob task in YAML (indented for spec.template.tasks).
func vcTask(name string, replicas int, cpu, memory string, gpus int, keepRunning bool, env string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "      - name: %s\n        replicas: %d\n        template:\n", name, replicas)
	if keepRunning {
		fmt.Fprintf(&b, "          metadata:\n            annotations: {%s: \"true\"}\n", testenv.KeepRunningAnnotation)
	}
	fmt.Fprintf(&b, "          spec:\n            restartPolicy: OnFailure\n            containers:\n              - name: %s\n                image: %s\n", name, vcPause)
	if env != "" {
		fmt.Fprintf(&b, "                env: [{name: SETTING, value: %q}]\n", env)
	}
	fmt.Fprintf(&b, "                resources:\n                  requests: {cpu: %s, memory: %s", cpu, memory)
	if gpus > 0 {
		fmt.Fprintf(&b, ", nvidia.com/gpu: \"%d\"}\n                  limits: {nvidia.com/gpu: \"%d\"}\n", gpus, gpus)
	} else {
		b.WriteString("}\n")
	}
	return b.String()
}

// vcJobFile is a GlobalJob document.
func vcJobFile(name, placement, queue string, minAvailable int, recreate bool, tasks ...string) string {
	rec := ""
	if recreate {
		rec = "  recreate: true\n"
	}
	return fmt.Sprintf(`apiVersion: flotilla.dev/v1alpha1
kind: GlobalJob
metadata:
  name: %s
spec:
  namespace: ml
%s  placement:
%s
  template:
    queue: %s
    minAvailable: %d
    tasks:
%s`, name, rec, placement, queue, minAvailable, strings.Join(tasks, ""))
}

// onCluster places a job on one cluster (Divided with a single weight).
func onCluster(cluster string) string {
	return fmt.Sprintf("    type: Divided\n    destination: {clusters: [%s]}\n    staticWeightList:\n      - targetCluster: {clusterNames: [%s]}\n        weight: 1", cluster, cluster)
}

// The seed TensorFlow job: 1 ps + 2 one-GPU workers, minAvailable 3, queue
// research-queue.
func seedTFJob(name, placement string) string {
	return vcJobFile(name, placement, "research-queue", 3, false,
		vcTask("ps", 1, "500m", "512Mi", 0, false, ""),
		vcTask("worker", 2, "1", "1Gi", 1, false, ""))
}

func gpuHog(setting string, recreate bool) string {
	return vcJobFile("gpu-hog", onCluster("member1"), "research-queue", 2, recreate,
		vcTask("worker", 2, "500m", "256Mi", 2, true, setting))
}

// renderVC runs `flotilla render` with the clusters' status from the Git
// server's repository (read in place).
func renderVC(t *testing.T, r *fleetrepo.Repo) {
	t.Helper()
	if out, err := hub(t, "render", "--repo", r.Dir, "--status-repo", r.Server.RepoPath(r.Name)); err != nil {
		t.Fatalf("flotilla render: %v\n%s", err, out)
	}
}

// TestVolcanoJobs runs GlobalJobs end to end: the hub places them (Divided
// by weights, BestFit from the capacity the agents report through Git),
// the agents preflight and submit them to the real Volcano on kwok GPU
// nodes, and report them back through Git to `flotilla status jobs`. The
// steps share the clusters and build on each other.
func TestVolcanoJobs(t *testing.T) {
	vc := testenv.StartClusters(t, 2, testenv.ClusterOptions{Mode: testenv.Full, Volcano: true, Nodes: volcanoNodes()})
	m1, m2 := vc[0], vc[1]
	plain := agentCluster(t)

	srv := newGitServer(t)
	dir := t.TempDir()
	treefile.Write(t, dir, vcBaseFiles())
	hubRender(t, dir)
	repo := fleetrepo.New(t, srv, vcRepo, dir)

	agents := map[string]*jobAgent{
		"member1": startJobAgent(t, jobAgentSpec{name: "member1", cluster: m1, srv: srv, repo: vcRepo, namespace: vcAgentNS}),
		// member2 keeps finished jobs of removed units for a second only.
		"member2":   startJobAgent(t, jobAgentSpec{name: "member2", cluster: m2, srv: srv, repo: vcRepo, namespace: vcAgentNS, retention: time.Second}),
		vcNoVolcano: startJobAgent(t, jobAgentSpec{name: vcNoVolcano, cluster: plain, srv: srv, repo: vcRepo, namespace: vcNoVolcanoNS}),
	}
	maintainerCreds := agentproc.CredentialsDir(t, gitserver.Maintainer, srv.Password(gitserver.Maintainer))
	statusCache := t.TempDir()

	t.Run("cluster without Volcano reports it and applies its other units", func(t *testing.T) {
		head := repo.Head()
		st := agents[vcNoVolcano].waitStatus(2*time.Minute, "queues unit failed, hello applied", func(st *status.ClusterStatus) bool {
			q := unitOf(st, slice.UnitVolcanoQueues)
			return q != nil && unitReason(q) == volcano.ReasonNotInstalled && unitIsReady(unitOf(st, "hello")) && unitOf(st, "hello").AppliedRevision == head
		})
		q := unitOf(st, slice.UnitVolcanoQueues)
		if !strings.Contains(q.LastError, "Volcano is not installed on this cluster") {
			t.Errorf("flotilla-queues error %q, want the clear message", q.LastError)
		}
		if !unitIsReady(unitOf(st, slice.UnitNamespaces)) {
			t.Errorf("namespaces unit not Ready: %s", describeStatus(st))
		}
		if st.Capacity == nil || st.Capacity.ReadyNodes == 0 || len(st.Capacity.Queues) != 0 {
			t.Errorf("capacity without Volcano = %+v, want nodes and no queues", st.Capacity)
		}
		for _, name := range []string{"member1", "member2"} {
			agents[name].waitStatus(2*time.Minute, "every unit Ready", func(st *status.ClusterStatus) bool {
				return st.AppliedRevision == head && allUnitsReady(st) && st.Capacity != nil && len(st.Capacity.Queues) >= 3
			})
		}
	})

	var tfUID types.UID
	t.Run("seed TensorFlow job completes, oversized gang is Unschedulable, Divided job lands 6/4", func(t *testing.T) {
		treefile.Write(t, dir, map[string]string{
			"jobs/tf-training.yaml": seedTFJob("tf-training", onCluster("member1")),
			"jobs/tf-big.yaml": vcJobFile("tf-big", onCluster("member2"), "research-queue", 4, false,
				vcTask("worker", 4, "500m", "256Mi", 2, false, "")),
			"jobs/spark.yaml": vcJobFile("spark", "    type: Divided\n    destination: {fleet: gpu}\n    staticWeightList:\n      - targetCluster: {clusterNames: [member1]}\n        weight: 3\n      - targetCluster: {clusterNames: [member2]}\n        weight: 2",
				"default", 10, false, vcTask("executor", 10, "100m", "128Mi", 0, false, "")),
		})
		renderVC(t, repo)
		repo.Push(t, "jobs: tf-training, tf-big, spark")

		st1 := agents["member1"].waitStatus(2*time.Minute, "tf-training and spark Completed", func(st *status.ClusterStatus) bool {
			tf, sp := jobOf(st, "tf-training"), jobOf(st, "spark")
			return tf != nil && tf.Phase == string(batchv1alpha1.Completed) && sp != nil && sp.Phase == string(batchv1alpha1.Completed)
		})
		tf := jobOf(st1, "tf-training")
		// (Volcano deletes a finished job's PodGroup: no PodGroup phase.)
		if tf.Succeeded != 3 || tf.Preflight != string(volcano.Fits) || tf.StartTime == nil || tf.CompletionTime == nil || tf.CompletionTime.Before(tf.StartTime) {
			t.Errorf("tf-training status %+v, want 3 succeeded, preflight Fits, start and finish times", *tf)
		}
		live := vcJob(t, m1, vcJobNS, "tf-training")
		if live == nil || live.Spec.MinAvailable != 3 || live.Spec.Queue != "research-queue" || live.Annotations[volcano.AnnotationSpecHash] == "" {
			t.Fatalf("live tf-training %+v", live)
		}
		tfUID = live.UID
		if sp := jobOf(st1, "spark"); sp.Succeeded != 6 {
			t.Errorf("spark on member1 succeeded %d, want 6 of 10", sp.Succeeded)
		}
		if j := vcJob(t, m1, vcJobNS, "spark"); j == nil || j.Spec.Tasks[0].Replicas != 6 || j.Spec.MinAvailable != 6 {
			t.Errorf("spark piece on member1 = %+v, want 6 replicas and minAvailable 6", j)
		}

		st2 := agents["member2"].waitStatus(2*time.Minute, "spark Completed, tf-big Unschedulable", func(st *status.ClusterStatus) bool {
			sp, big := jobOf(st, "spark"), jobOf(st, "tf-big")
			return sp != nil && sp.Phase == string(batchv1alpha1.Completed) && big != nil && big.Preflight == string(volcano.Unschedulable)
		})
		if sp := jobOf(st2, "spark"); sp.Succeeded != 4 {
			t.Errorf("spark on member2 succeeded %d, want 4 of 10", sp.Succeeded)
		}
		big := jobOf(st2, "tf-big")
		if big.Phase != volcano.PhaseNotSubmitted || !strings.Contains(big.Message, "needs 8 nvidia.com/gpu, schedulable nodes have 4") {
			t.Errorf("tf-big status %+v, want NotSubmitted with the shortfall", *big)
		}
		if u := unitOf(st2, "job-tf-big"); unitIsReady(u) || unitReason(u) != volcano.ReasonUnschedulable {
			t.Errorf("unit job-tf-big = %+v, want not Ready, Unschedulable", u)
		}
		if j := vcJob(t, m2, vcJobNS, "tf-big"); j != nil {
			t.Errorf("tf-big was submitted: %+v", j.Status)
		}
		if pods := vcJobPods(t, m2, vcJobNS, "tf-big"); len(pods) != 0 {
			t.Errorf("tf-big has %d pods, want none", len(pods))
		}
		for _, pg := range podGroups(t, m2, vcJobNS) {
			if strings.HasPrefix(pg.Name, "tf-big") {
				t.Errorf("tf-big has a PodGroup %s", pg.Name)
			}
		}

		// The outcome, through Git, in `flotilla status jobs`.
		waitFor(t, time.Minute, "status jobs shows the outcomes", func() (bool, string) {
			v, err := statusJobs(t, srv, vcRepo, maintainerCreds, statusCache)
			if err != nil {
				return false, err.Error()
			}
			tf, big, s1, s2 := rowOf(v, "member1", "tf-training"), rowOf(v, "member2", "tf-big"), rowOf(v, "member1", "spark"), rowOf(v, "member2", "spark")
			ok := tf != nil && tf.Phase == "Completed" && tf.Succeeded == 3 &&
				big != nil && big.Preflight == "Unschedulable" && strings.Contains(big.Message, "needs 8 nvidia.com/gpu") &&
				s1 != nil && s1.Succeeded == 6 && s2 != nil && s2.Succeeded == 4
			return ok, fmt.Sprintf("%+v", v.Jobs)
		})
		table, err := hub(t, "status", "jobs", "--repo", srv.URL(vcRepo), "--git-credentials-dir", maintainerCreds, "--cache-dir", statusCache)
		if err != nil || !strings.Contains(table, "ml/tf-training") || !strings.Contains(table, "Unschedulable") {
			t.Errorf("status jobs table: %v\n%s", err, table)
		}
		t.Logf("flotilla status jobs:\n%s", table)
	})

	t.Run("BestFit picks the cluster with free GPUs from status", func(t *testing.T) {
		treefile.Write(t, dir, map[string]string{"jobs/gpu-hog.yaml": gpuHog("a", false)})
		renderVC(t, repo)
		repo.Push(t, "gpu-hog takes member1's GPUs")
		agents["member1"].waitStatus(2*time.Minute, "gpu-hog Running in a Running PodGroup, no free GPU", func(st *status.ClusterStatus) bool {
			h := jobOf(st, "gpu-hog")
			return h != nil && h.Phase == string(batchv1alpha1.Running) && h.Running == 2 && h.PodGroupPhase == "Running" &&
				st.Capacity != nil && st.Capacity.Free["nvidia.com/gpu"] == "0" && st.Capacity.Allocatable["nvidia.com/gpu"] == "4"
		})
		// Wait until Git has it too: the hub reads nothing else.
		waitFor(t, time.Minute, "member1's committed status shows gpu-hog Running", func() (bool, string) {
			v, err := statusJobs(t, srv, vcRepo, maintainerCreds, statusCache)
			if err != nil {
				return false, err.Error()
			}
			h := rowOf(v, "member1", "gpu-hog")
			return h != nil && h.Phase == "Running", fmt.Sprintf("%+v", h)
		})

		treefile.Write(t, dir, map[string]string{"jobs/tf-best.yaml": seedTFJob("tf-best", "    type: BestFit\n    destination: {fleet: gpu}")})
		// Without status (hints only, equal) the tie goes to member1 by name.
		noStatus := t.TempDir()
		treefile.Write(t, noStatus, treefile.Read(t, dir))
		if err := os.RemoveAll(filepath.Join(noStatus, slice.RenderedDir)); err != nil {
			t.Fatal(err)
		}
		repoNoStatus, err := fleet.Load(context.Background(), noStatus)
		if err != nil {
			t.Fatal(err)
		}
		out, err := fleetrender.Compile(context.Background(), repoNoStatus, fleetrender.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := jobClusters(out, "job-tf-best"); got != "member1" {
			t.Fatalf("without status tf-best goes to %q, want member1 (tie by name)", got)
		}
		renderVC(t, repo)
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(slice.UnitDir("member2", "job-tf-best")))); err != nil {
			t.Fatalf("tf-best not rendered to member2: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(slice.UnitDir("member1", "job-tf-best")))); err == nil {
			t.Fatal("tf-best rendered to member1, whose GPUs are all in use")
		}
		repo.Push(t, "tf-best, placed by status")
		agents["member2"].waitStatus(2*time.Minute, "tf-best Completed", func(st *status.ClusterStatus) bool {
			j := jobOf(st, "tf-best")
			return j != nil && j.Phase == string(batchv1alpha1.Completed) && j.Succeeded == 3
		})

		// A job that fits nowhere is a render error naming the shortfall.
		treefile.Write(t, dir, map[string]string{"jobs/tf-huge.yaml": vcJobFile("tf-huge", "    type: BestFit\n    destination: {fleet: gpu}", "research-queue", 4, false,
			vcTask("worker", 4, "500m", "256Mi", 2, false, ""))})
		_, stderr, err := hubOutput(t, "render", "--repo", dir, "--status-repo", srv.RepoPath(vcRepo))
		if want := "job tf-huge: needs 8 nvidia.com/gpu, best cluster member2 has 4"; err == nil || !strings.Contains(stderr, want) {
			t.Fatalf("render of a job that fits nowhere: %v\n%s\nwant the error %q", err, stderr, want)
		}
		if err := os.Remove(filepath.Join(dir, "jobs", "tf-huge.yaml")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a completed job is not re-run after the next commit", func(t *testing.T) {
		before := map[string]types.UID{}
		for _, c := range []struct {
			cl   *testenv.Cluster
			name string
		}{{m1, "spark"}, {m2, "spark"}, {m2, "tf-best"}} {
			j := vcJob(t, c.cl, vcJobNS, c.name)
			if j == nil {
				t.Fatalf("%s missing", c.name)
			}
			before[string(j.UID)] = j.UID
		}
		treefile.Write(t, dir, map[string]string{"apps/hello/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\ndata:\n  greeting: hi\n"})
		renderVC(t, repo)
		head := repo.Push(t, "an unrelated change")
		for _, name := range []string{"member1", "member2"} {
			agents[name].waitStatus(2*time.Minute, "hello applied at the new head", func(st *status.ClusterStatus) bool {
				h := unitOf(st, "hello")
				return h != nil && h.AppliedRevision == head && unitIsReady(h)
			})
		}
		// Two more cycles, then the jobs must be the same runs.
		time.Sleep(5 * time.Second)
		j := vcJob(t, m1, vcJobNS, "tf-training")
		if j == nil || j.UID != tfUID || j.Status.State.Phase != batchv1alpha1.Completed {
			t.Fatalf("tf-training after the next commit: %+v, want the same completed run %s", j, tfUID)
		}
		if pods := vcJobPods(t, m1, vcJobNS, "tf-training"); len(pods) != 3 {
			t.Errorf("tf-training has %d pods, want the 3 of its only run", len(pods))
		}
		for _, c := range []struct {
			cl   *testenv.Cluster
			name string
		}{{m1, "spark"}, {m2, "spark"}, {m2, "tf-best"}} {
			j := vcJob(t, c.cl, vcJobNS, c.name)
			if j == nil || before[string(j.UID)] == "" {
				t.Errorf("%s was re-run: %+v", c.name, j)
			}
		}
		// Settled: member1's job units (finished or running) cost no
		// render, let alone a write, per cycle.
		if n := agents["member1"].rendersOverNextCycles(3); n != 0 {
			t.Errorf("member1 rendered %d units over 3 cycles, want 0 once settled", n)
		}
	})

	var hogUID types.UID
	var hogHash string
	t.Run("a changed spec of a running job is reported, not applied", func(t *testing.T) {
		h := vcJob(t, m1, vcJobNS, "gpu-hog")
		hogUID, hogHash = h.UID, h.Annotations[volcano.AnnotationSpecHash]
		treefile.Write(t, dir, map[string]string{"jobs/gpu-hog.yaml": gpuHog("b", false)})
		renderVC(t, repo)
		repo.Push(t, "gpu-hog: new setting")
		st := agents["member1"].waitStatus(2*time.Minute, "spec change reported", func(st *status.ClusterStatus) bool {
			return unitReason(unitOf(st, "job-gpu-hog")) == volcano.ReasonSpecChanged
		})
		if u := unitOf(st, "job-gpu-hog"); !strings.Contains(u.LastError, volcano.MessageSpecChanged) {
			t.Errorf("unit message %q", u.LastError)
		}
		if j := jobOf(st, "gpu-hog"); j == nil || j.Message != volcano.MessageSpecChanged || j.Phase != string(batchv1alpha1.Running) {
			t.Errorf("gpu-hog status %+v, want Running with %q", j, volcano.MessageSpecChanged)
		}
		time.Sleep(5 * time.Second)
		h = vcJob(t, m1, vcJobNS, "gpu-hog")
		if h.UID != hogUID || h.Annotations[volcano.AnnotationSpecHash] != hogHash || h.Spec.Tasks[0].Template.Spec.Containers[0].Env[0].Value != "a" {
			t.Fatalf("running gpu-hog was changed: uid %s→%s hash %s→%s", hogUID, h.UID, hogHash, h.Annotations[volcano.AnnotationSpecHash])
		}
		waitFor(t, time.Minute, "status jobs reports the spec change", func() (bool, string) {
			v, err := statusJobs(t, srv, vcRepo, maintainerCreds, statusCache)
			if err != nil {
				return false, err.Error()
			}
			r := rowOf(v, "member1", "gpu-hog")
			return r != nil && r.Message == volcano.MessageSpecChanged, fmt.Sprintf("%+v", r)
		})
	})

	t.Run("recreate replaces the running job", func(t *testing.T) {
		treefile.Write(t, dir, map[string]string{"jobs/gpu-hog.yaml": gpuHog("b", true)})
		renderVC(t, repo)
		repo.Push(t, "gpu-hog: recreate")
		var h *batchv1alpha1.Job
		waitFor(t, 2*time.Minute, "gpu-hog recreated and Running", func() (bool, string) {
			h = vcJob(t, m1, vcJobNS, "gpu-hog")
			if h == nil {
				return false, "absent"
			}
			return h.UID != hogUID && h.Status.State.Phase == batchv1alpha1.Running, fmt.Sprintf("uid %s phase %s", h.UID, h.Status.State.Phase)
		})
		if h.Spec.Tasks[0].Template.Spec.Containers[0].Env[0].Value != "b" || h.Annotations[volcano.AnnotationSpecHash] == hogHash {
			t.Errorf("recreated gpu-hog does not have the new spec")
		}
		agents["member1"].waitStatus(time.Minute, "job-gpu-hog Ready", func(st *status.ClusterStatus) bool {
			return unitIsReady(unitOf(st, "job-gpu-hog"))
		})
	})

	t.Run("jobs removed from Git are deleted, finished ones after the retention", func(t *testing.T) {
		repo.Remove(t, "jobs/gpu-hog.yaml")
		repo.Remove(t, "jobs/spark.yaml")
		renderVC(t, repo)
		head := repo.Push(t, "remove gpu-hog and spark")
		agents["member1"].waitStatus(2*time.Minute, "hello at the new head", func(st *status.ClusterStatus) bool {
			return unitOf(st, "hello").AppliedRevision == head && unitOf(st, "job-gpu-hog") == nil
		})
		waitFor(t, time.Minute, "running gpu-hog deleted on member1, spark deleted on member2", func() (bool, string) {
			hog, sp := vcJob(t, m1, vcJobNS, "gpu-hog"), vcJob(t, m2, vcJobNS, "spark")
			return hog == nil && sp == nil, fmt.Sprintf("gpu-hog present %v, member2 spark present %v", hog != nil, sp != nil)
		})
		// member1 keeps finished jobs for the default hour.
		time.Sleep(5 * time.Second)
		if j := vcJob(t, m1, vcJobNS, "spark"); j == nil || j.Status.State.Phase != batchv1alpha1.Completed {
			t.Errorf("member1's finished spark piece was deleted within its retention: %+v", j)
		}
	})
}

// jobClusters names the clusters that have unit in out.
func jobClusters(out *fleetrender.Output, unit string) string {
	var names []string
	for _, co := range out.Clusters {
		for _, u := range co.Slice.Units {
			if u.Name == unit {
				names = append(names, co.Slice.Cluster)
			}
		}
	}
	return strings.Join(names, ",")
}
