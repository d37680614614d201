package fleetrender_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/placement"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// capacities is a CapacitySource from literal figures.
type capacities map[string]*placement.Capacity

func (c capacities) CapacityFor(cluster string) (*placement.Capacity, bool) {
	cp, ok := c[cluster]
	return cp, ok
}

func gpus(free string) *placement.Capacity {
	return &placement.Capacity{Free: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		"nvidia.com/gpu": resource.MustParse(free),
	}}
}

// jobUnitsOf maps cluster → job units of the output.
func jobUnitsOf(out *fleetrender.Output) map[string][]string {
	m := map[string][]string{}
	for _, co := range out.Clusters {
		for _, u := range co.Slice.Units {
			if strings.HasPrefix(u.Name, slice.VolcanoJobPrefix) {
				m[co.Slice.Cluster] = append(m[co.Slice.Cluster], u.Name)
			}
		}
	}
	return m
}

func renderedJob(t *testing.T, root string, out *fleetrender.Output, cluster, unit string) *batchv1alpha1.Job {
	t.Helper()
	j := &batchv1alpha1.Job{}
	if err := yaml.Unmarshal([]byte(unitObjects(t, root, out, cluster, unit)), j); err != nil {
		t.Fatal(err)
	}
	return j
}

func TestBestFitFromStatus(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", "volcano-jobs.txtar"))
	// Hints say member2; status says member2's GPUs are all in use.
	out := compileRepo(t, root, fleetrender.Options{Capacity: capacities{"member1": gpus("4"), "member2": gpus("0")}})
	units := jobUnitsOf(out)
	if got := strings.Join(units["member1"], " "); got != "job-spark job-tf-training" {
		t.Fatalf("member1 job units %q, want spark and tf-training", got)
	}
	if got := strings.Join(units["member2"], " "); got != "job-spark" {
		t.Fatalf("member2 job units %q, want spark only", got)
	}

	// Once rendered, the job stays where it is even when capacity moves.
	if _, err := fleetrender.Write(context.Background(), root, out, fleetrender.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	repo, err := fleet.Load(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	again := compileRepo(t, root, fleetrender.Options{
		Capacity: capacities{"member1": gpus("0"), "member2": gpus("8")},
		Placed:   fleetrender.ReadPlaced(repo, fleetrender.RenderedAt(root)),
	})
	if got := strings.Join(jobUnitsOf(again)["member1"], " "); got != "job-spark job-tf-training" {
		t.Fatalf("after capacity moved, member1 job units %q: a placed job must not move", got)
	}
	ch, err := fleetrender.Write(context.Background(), root, again, fleetrender.WriteOptions{Check: true})
	if err != nil || !ch.Empty() {
		t.Fatalf("re-render with other capacity changed rendered/: %v %v", ch.All(), err)
	}
}

func TestBestFitQueueRoomFromStatus(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", "volcano-jobs.txtar"))
	// Both clusters have free GPUs, but member2's research-queue is full.
	m2 := gpus("8")
	m2.QueueFree = map[string]corev1.ResourceList{"research-queue": {"nvidia.com/gpu": resource.MustParse("1")}}
	out := compileRepo(t, root, fleetrender.Options{Capacity: capacities{"member1": gpus("2"), "member2": m2}})
	if got := jobUnitsOf(out)["member1"]; len(got) != 2 {
		t.Fatalf("member1 job units %v, want tf-training there", got)
	}
}

func TestBestFitNoFit(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", "volcano-jobs.txtar"))
	big := strings.Replace(readArchive(t, filepath.Join("testdata", "fixtures", "volcano-jobs.txtar"))["jobs/tf-training.yaml"],
		"replicas: 2", "replicas: 8", 1)
	big = strings.Replace(big, "minAvailable: 3", "minAvailable: 9", 1)
	big = strings.Replace(big, "name: tf-training", "name: tf-big", 1)
	if err := os.WriteFile(filepath.Join(root, "jobs", "tf-big.yaml"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := fleet.Load(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fleetrender.Compile(context.Background(), repo, fleetrender.Options{Capacity: capacities{"member1": gpus("2"), "member2": gpus("4")}})
	if !errors.Is(err, placement.ErrNoFit) {
		t.Fatalf("Compile() error = %v, want ErrNoFit", err)
	}
	want := "jobs/tf-big.yaml:1: spec.placement: no cluster fits the gang: job tf-big: needs 8 nvidia.com/gpu, best cluster member2 has 4"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("Compile() error =\n%v\nwant it to contain\n%s", err, want)
	}
	// Validation alone does not need capacity.
	if _, err := fleetrender.Compile(context.Background(), repo, fleetrender.Options{ValidateOnly: true}); err != nil {
		t.Fatalf("ValidateOnly: %v", err)
	}
}

func TestDividedJobPieces(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", "volcano-jobs.txtar"))
	out := renderRepo(t, root, fleetrender.Options{})
	type want struct {
		min   int32
		tasks map[string][2]int32 // replicas, minAvailable
	}
	for cluster, w := range map[string]want{
		"member1": {7, map[string][2]int32{"driver": {1, 1}, "executor": {6, 6}}},
		"member2": {5, map[string][2]int32{"driver": {1, 1}, "executor": {4, 4}}},
	} {
		j := renderedJob(t, root, out, cluster, "job-spark")
		if j.Spec.MinAvailable != w.min || len(j.Spec.Tasks) != len(w.tasks) {
			t.Errorf("%s: minAvailable %d with %d tasks, want %d with %d", cluster, j.Spec.MinAvailable, len(j.Spec.Tasks), w.min, len(w.tasks))
		}
		var replicas int32
		for _, task := range j.Spec.Tasks {
			wt := w.tasks[task.Name]
			if task.Replicas != wt[0] || task.MinAvailable == nil || *task.MinAvailable != wt[1] {
				t.Errorf("%s: task %s replicas %d minAvailable %v, want %v", cluster, task.Name, task.Replicas, task.MinAvailable, wt)
			}
			replicas += task.Replicas
		}
		if j.Spec.MinAvailable < 1 || j.Spec.MinAvailable > replicas {
			t.Errorf("%s: minAvailable %d outside [1, %d]", cluster, j.Spec.MinAvailable, replicas)
		}
		if j.Spec.SchedulerName != "volcano" || j.Spec.Queue != "default" || j.Annotations["flotilla.dev/recreate"] != "true" {
			t.Errorf("%s: defaults or recreate annotation missing: %+v %v", cluster, j.Spec, j.Annotations)
		}
	}
}

// TestDividedJobWithoutWholeRole: a division that leaves a cluster's piece
// without one of the job's tasks is an error that names the cluster and
// the task and suggests BestFit.
func TestDividedJobWithoutWholeRole(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", "volcano-jobs.txtar"))
	p := filepath.Join(root, "jobs", "spark.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// One driver divided 3:2: member2's piece would be executors alone.
	s := strings.Replace(string(b), "replicas: 2", "replicas: 1", 1)
	s = strings.Replace(s, "minAvailable: 12", "minAvailable: 11", 1)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := fleet.Load(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	for _, validate := range []bool{false, true} {
		_, err = fleetrender.Compile(context.Background(), repo, fleetrender.Options{ValidateOnly: validate, Capacity: capacities{"member1": gpus("8"), "member2": gpus("8")}})
		if !errors.Is(err, fleetrender.ErrIncompletePiece) {
			t.Fatalf("Compile(ValidateOnly=%v) error = %v, want ErrIncompletePiece", validate, err)
		}
		want := "jobs/spark.yaml:1: spec.placement: divided job piece without a task: job spark: the piece on cluster member2 has no replica of task driver " +
			"(1 replicas divided over 2 clusters); every piece of a Divided job runs as a gang of its own and needs every task: " +
			"give task driver at least one replica per cluster, or use placement type BestFit to run the whole job on one cluster"
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Compile() error =\n%v\nwant it to contain\n%s", err, want)
		}
	}
}

func TestDividedJobSkipsEmptyPieces(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", "volcano-jobs.txtar"))
	p := filepath.Join(root, "jobs", "spark.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// Weight 0 for member2: the whole job on member1, none on member2.
	s := strings.Replace(string(b), "weight: 2", "weight: 0", 1)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	out := renderRepo(t, root, fleetrender.Options{Capacity: capacities{"member1": gpus("0"), "member2": gpus("8")}})
	units := jobUnitsOf(out)
	if strings.Contains(strings.Join(units["member2"], " "), "job-spark") {
		t.Fatalf("member2 got a spark piece with no replicas: %v", units)
	}
	if j := renderedJob(t, root, out, "member1", "job-spark"); j.Spec.MinAvailable != 12 {
		t.Fatalf("member1 piece minAvailable %d, want 12", j.Spec.MinAvailable)
	}
}

func TestQueueConflict(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", "volcano-jobs.txtar"))
	other := `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: other
spec:
  clusters: [member1]
  queues:
    - name: research-queue
      weight: 5
`
	if err := os.WriteFile(filepath.Join(root, "fleets", "other.yaml"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := fleet.Load(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fleetrender.Compile(context.Background(), repo, fleetrender.Options{})
	if !errors.Is(err, fleetrender.ErrConflict) || !strings.Contains(err.Error(), "queue research-queue is declared differently") {
		t.Fatalf("Compile() error = %v, want a queue conflict", err)
	}
}
