package status

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMeaningfullyChanged(t *testing.T) {
	const newRev = "main@sha1:2222222222222222222222222222222222222222"
	tests := []struct {
		name   string
		edit   func(d *ClusterStatus)
		change bool
	}{
		{"identical", func(d *ClusterStatus) {}, false},
		{"heartbeat only", func(d *ClusterStatus) { d.Heartbeat = metav1.NewTime(t0.Add(time.Hour)) }, false},
		{"condition transition time only", func(d *ClusterStatus) {
			d.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(time.Hour))
			d.Units[0].Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(time.Hour))
		}, false},
		{"revisions moved, slice unchanged", func(d *ClusterStatus) {
			d.DesiredRevision, d.FetchedRevision, d.AppliedRevision = newRev, newRev, newRev
			d.Units[0].AppliedRevision, d.Units[1].AppliedRevision = newRev, newRev
			d.Conditions[0].Message = "Applied revision: " + newRev
		}, false},
		{"drift corrections", func(d *ClusterStatus) { d.Units[1].DriftCorrections = 7 }, false},
		{"free capacity", func(d *ClusterStatus) { d.Capacity.Free["cpu"] = "1" }, false},
		{"queue allocation", func(d *ClusterStatus) { d.Capacity.Queues[0].Allocated["cpu"] = "9" }, false},
		{"job running pods", func(d *ClusterStatus) { d.Jobs[0].Running = 1 }, false},
		{"units reordered", func(d *ClusterStatus) { d.Units[0], d.Units[1] = d.Units[1], d.Units[0] }, false},

		{"unit hash", func(d *ClusterStatus) { d.Units[0].Hash = "sha256:cc" }, true},
		{"unit added", func(d *ClusterStatus) { d.Units = append(d.Units, UnitStatus{Name: "new"}) }, true},
		{"unit removed", func(d *ClusterStatus) { d.Units = d.Units[:1] }, true},
		{"unit not ready", func(d *ClusterStatus) {
			d.Units[0].Conditions[0].Status = metav1.ConditionFalse
			d.Units[0].Conditions[0].Reason = ReasonApplyFailed
		}, true},
		{"unit error", func(d *ClusterStatus) { d.Units[0].LastError = "boom" }, true},
		{"applied revision lost", func(d *ClusterStatus) { d.AppliedRevision = "" }, true},
		{"loop error", func(d *ClusterStatus) { d.LastError = "fetch: unreachable" }, true},
		{"condition message", func(d *ClusterStatus) { d.Conditions[0].Message = "units web not ready" }, true},
		{"reconciling condition added", func(d *ClusterStatus) {
			d.Conditions = append(d.Conditions, metav1.Condition{Type: ConditionReconciling, Status: metav1.ConditionTrue, Reason: ReasonProgressing})
		}, true},
		{"object count", func(d *ClusterStatus) { d.Units[0].Objects = 4 }, true},
		{"job phase", func(d *ClusterStatus) { d.Jobs[0].Phase = "Completed" }, true},
		{"job succeeded", func(d *ClusterStatus) { d.Jobs[0].Succeeded = 2 }, true},
		{"ready nodes", func(d *ClusterStatus) { d.Capacity.ReadyNodes = 2 }, true},
		{"allocatable", func(d *ClusterStatus) { d.Capacity.Allocatable["nvidia.com/gpu"] = "4" }, true},
		{"kubernetes version", func(d *ClusterStatus) { d.KubernetesVersion = "v1.37.0" }, true},
		{"agent version", func(d *ClusterStatus) { d.Agent.Version = "v0.2.0" }, true},
		{"verification", func(d *ClusterStatus) { d.Verification = &Verification{Mode: "head", Verified: false} }, true},
		{"a cycle in progress", func(d *ClusterStatus) { d.Progress = &Progress{Phase: PhaseUnits, Started: metav1.NewTime(t0)} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := sampleDoc()
			cur := sampleDoc()
			tt.edit(cur)
			if got := MeaningfullyChanged(old, cur); got != tt.change {
				t.Errorf("MeaningfullyChanged = %v, want %v", got, tt.change)
			}
			if got := MeaningfullyChanged(cur, old); got != tt.change {
				t.Errorf("MeaningfullyChanged (reversed) = %v, want %v", got, tt.change)
			}
		})
	}
	if !MeaningfullyChanged(nil, sampleDoc()) {
		t.Error("the first document must count as a change")
	}
	if MeaningfullyChanged(nil, nil) {
		t.Error("nil, nil is no change")
	}
}

// TestProgressRidesAlong: a running cycle's progress moving on is not
// worth a commit of its own; heartbeats carry it.
func TestProgressRidesAlong(t *testing.T) {
	old, cur := sampleDoc(), sampleDoc()
	old.Progress = &Progress{Phase: PhaseFetch, Started: metav1.NewTime(t0)}
	cur.Progress = &Progress{Phase: PhaseUnits, Started: metav1.NewTime(t0), Units: []UnitProgress{{Name: "web", Since: metav1.NewTime(t0.Add(time.Second))}}}
	if MeaningfullyChanged(old, cur) {
		t.Error("progress moving on counts as a change")
	}
}

func TestShard(t *testing.T) {
	counts := make([]int, 8)
	for i := 0; i < 8000; i++ {
		name := "cluster-" + string(rune('a'+i%26)) + metav1.NewTime(t0.Add(time.Duration(i)*time.Second)).Format("150405")
		s := Shard(name, 8)
		if s < 0 || s >= 8 {
			t.Fatalf("shard %d out of range", s)
		}
		if Shard(name, 8) != s {
			t.Fatal("Shard is not stable")
		}
		counts[s]++
	}
	for i, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("shard %d holds %d of 8000 clusters: badly spread %v", i, n, counts)
		}
	}
	if Shard("x", 1) != 0 || Shard("x", 0) != 0 {
		t.Error("one shard must be shard 0")
	}
}

func TestShardURL(t *testing.T) {
	tests := []struct {
		tmpl    string
		shards  int
		want    string
		wantErr bool
	}{
		{"https://git/fleet.git", 1, "https://git/fleet.git", false},
		{"https://git/fleet.git", 4, "", true},
		{"https://git/status-{shard}.git", 1, "https://git/status-0.git", false},
		{"https://git/status-{shard}.git", 0, "", true},
	}
	for _, tt := range tests {
		got, err := ShardURL(tt.tmpl, "member1", tt.shards)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ShardURL(%q, %d) = %q, %v", tt.tmpl, tt.shards, got, err)
		}
	}
	got, err := ShardURL("https://git/status-{shard}.git", "member1", 16)
	if err != nil {
		t.Fatal(err)
	}
	urls := ShardURLs("https://git/status-{shard}.git", 16)
	if len(urls) != 16 || urls[Shard("member1", 16)] != got {
		t.Errorf("ShardURLs does not agree with ShardURL: %q not at %d in %v", got, Shard("member1", 16), urls)
	}
}
