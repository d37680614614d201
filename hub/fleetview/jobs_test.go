package fleetview

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/agent/volcano"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

func TestJobsView(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }
	docs := &Documents{
		Repo: "https://git.example.com/fleet.git", Branch: "main", Revision: "main@sha1:abc",
		Clusters: []ClusterDocument{
			{Cluster: "member2", Document: &status.ClusterStatus{Heartbeat: *at(time.Minute), Jobs: []status.JobStatus{
				{Name: "tf-big", Namespace: "ml", Unit: "job-tf-big", Phase: volcano.PhaseNotSubmitted, Preflight: "Unschedulable",
					Message: "Unschedulable: gang of 4 pods needs 8 nvidia.com/gpu, schedulable nodes have 4"},
				{Name: "spark", Namespace: "ml", Unit: "job-spark", Phase: "Completed", PodGroupPhase: "Completed", Succeeded: 4,
					Preflight: "Fits", StartTime: at(10 * time.Minute), CompletionTime: at(9 * time.Minute)},
			}}},
			{Cluster: "member1", Document: &status.ClusterStatus{Heartbeat: *at(time.Minute), Jobs: []status.JobStatus{
				{Name: "gpu-hog", Namespace: "ml", Phase: "Running", PodGroupPhase: "Running", Running: 2, Preflight: "Fits",
					StartTime: at(3 * time.Hour), Message: volcano.MessageSpecChanged},
			}}},
			{Cluster: "edge-1"},
		},
	}
	v := NewJobsView(docs, now)
	if len(v.Jobs) != 3 || v.Jobs[0].Cluster != "member1" || v.Jobs[1].Name != "spark" || v.Jobs[2].Name != "tf-big" {
		t.Fatalf("rows not sorted by cluster, namespace, name: %+v", v.Jobs)
	}
	if v.Summary["Running"] != 1 || v.Summary["Completed"] != 1 || v.Summary[volcano.PhaseNotSubmitted] != 1 {
		t.Errorf("summary %v", v.Summary)
	}
	if len(v.NoStatus) != 1 || v.NoStatus[0] != "edge-1" {
		t.Errorf("noStatus %v", v.NoStatus)
	}

	var table bytes.Buffer
	if err := WriteJobs(&table, v, FormatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"3 jobs, 1 Completed, 1 NotSubmitted, 1 Running",
		"CLUSTER", "member1  ml/gpu-hog", "3h ago", "spec changed; running job left as is",
		"member2  ml/spark", "10m ago", "9m ago",
		"needs 8 nvidia.com/gpu, schedulable nodes have 4",
		"no status from: edge-1",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}

	var js bytes.Buffer
	if err := WriteJobs(&js, v, FormatJSON); err != nil {
		t.Fatal(err)
	}
	back := &JobsView{}
	if err := json.Unmarshal(js.Bytes(), back); err != nil || len(back.Jobs) != 3 || back.Jobs[2].Preflight != "Unschedulable" || back.Jobs[0].Cluster != "member1" {
		t.Fatalf("json round trip: %v %+v", err, back)
	}
	var ys bytes.Buffer
	if err := WriteJobs(&ys, v, FormatYAML); err != nil {
		t.Fatal(err)
	}
	backY := &JobsView{}
	if err := yaml.Unmarshal(ys.Bytes(), backY); err != nil || len(backY.Jobs) != 3 || backY.Jobs[1].Succeeded != 4 {
		t.Fatalf("yaml round trip: %v %+v", err, backY)
	}
	var md bytes.Buffer
	if err := WriteJobs(&md, v, FormatMarkdown); err != nil || !strings.Contains(md.String(), "| member2 | ml/tf-big | NotSubmitted |") {
		t.Fatalf("markdown: %v\n%s", err, md.String())
	}
	if err := WriteJobs(&md, v, "xml"); err == nil {
		t.Fatal("unknown format accepted")
	}
}

func TestCapacitiesFrom(t *testing.T) {
	docs := &Documents{Clusters: []ClusterDocument{
		{Cluster: "member1", Document: &status.ClusterStatus{Capacity: &status.Capacity{
			ReadyNodes: 2,
			Free:       map[string]string{"cpu": "30500m", "memory": "250Gi", "nvidia.com/gpu": "0"},
			Queues: []status.QueueCapacity{
				{Name: "research-queue", Capability: map[string]string{"nvidia.com/gpu": "4"}, Allocated: map[string]string{"nvidia.com/gpu": "3", "cpu": "2"}},
				{Name: "default"},
			},
		}}},
		{Cluster: "member2", Document: &status.ClusterStatus{Capacity: &status.Capacity{Free: map[string]string{"cpu": "lots"}}}},
		{Cluster: "member3", Document: &status.ClusterStatus{}},
		{Cluster: "edge-1"},
	}}
	caps, warnings := CapacitiesFrom(docs)
	m1, ok := caps.CapacityFor("member1")
	if !ok {
		t.Fatal("member1 missing")
	}
	if q := m1.Free["cpu"]; q.MilliValue() != 30500 {
		t.Errorf("member1 free cpu %s", q.String())
	}
	room := m1.QueueFree["research-queue"]
	if q := room["nvidia.com/gpu"]; q.Value() != 1 || len(room) != 1 {
		t.Errorf("research-queue room %v, want 1 GPU and nothing else", room)
	}
	if _, limited := m1.QueueFree["default"]; limited {
		t.Error("a queue without capability must not limit")
	}
	if _, ok := caps.CapacityFor("member3"); ok {
		t.Error("a document without capacity gave one")
	}
	if _, ok := caps.CapacityFor("edge-1"); ok {
		t.Error("a cluster without status gave a capacity")
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `cluster member2 status capacity free: cpu "lots"`) {
		t.Errorf("warnings %q", warnings)
	}
}
