package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

var benchT0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// StatusDoc is a realistic document: units applications, two Volcano jobs,
// a capacity snapshot with a queue.
func StatusDoc(cluster, rev string, units, round int) *status.ClusterStatus {
	ready := func(msg string) []metav1.Condition {
		return []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSucceeded,
			Message: msg, LastTransitionTime: metav1.NewTime(benchT0)}}
	}
	d := &status.ClusterStatus{
		Cluster: cluster, Agent: status.Agent{Version: "v0.1.0", Identity: "flotilla-agent-7d9f8c6b5-x2k4p"},
		KubernetesVersion: "v1.36.3", APIVersions: []string{"v1", "apps/v1", "batch/v1", "batch.volcano.sh/v1alpha1", "networking.k8s.io/v1"},
		DesiredRevision: rev, FetchedRevision: rev, AppliedRevision: rev,
		Conditions: ready("Applied revision: " + rev),
		Capacity: &status.Capacity{ReadyNodes: 12,
			Allocatable: map[string]string{"cpu": "96", "memory": "384Gi", "nvidia.com/gpu": "16"},
			Free:        map[string]string{"cpu": "40", "memory": "200Gi", "nvidia.com/gpu": "6"},
			Queues:      []status.QueueCapacity{{Name: "default", State: "Open", Capability: map[string]string{"cpu": "64"}, Allocated: map[string]string{"cpu": "20"}}}},
		Heartbeat: metav1.NewTime(benchT0),
	}
	for u := 0; u < units; u++ {
		name := AppName(u)
		if u == 0 {
			name += fmt.Sprintf("-r%d", round) // what makes a round's document a meaningful change
		}
		d.Units = append(d.Units, status.UnitStatus{Name: name, Hash: fmt.Sprintf("sha256:%064x", u+round*1000), AppliedRevision: rev,
			Objects: 4, Conditions: ready("")})
	}
	start := metav1.NewTime(benchT0.Add(-time.Hour))
	d.Jobs = []status.JobStatus{
		{Name: "train", Namespace: "ml", Unit: "job-train", Phase: "Running", Running: 8, StartTime: &start},
		{Name: "etl", Namespace: "ml", Unit: "job-etl", Phase: "Completed", Succeeded: 4, StartTime: &start, CompletionTime: &start},
	}
	return d
}

// StatusFleetRepo fills the server's "fleet" repo: clusters/ and fleets/
// for n clusters and a slice each (commit c1), a commit c2 changing 10
// slices, and a status ref per cluster (applied at c1, or at c2 for the 10).
// It returns the bare repository's path and c2.
func StatusFleetRepo(b testing.TB, srv *gitserver.Server, n int) (string, string) {
	b.Helper()
	dir := b.TempDir()
	if err := Generate(dir, Spec{Clusters: n, Apps: 20}); err != nil {
		b.Fatal(err)
	}
	for c := 0; c < n; c++ {
		p := filepath.Join(dir, filepath.FromSlash(slice.SlicePath(ClusterName(c))))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("cluster: "+ClusterName(c)+"\nversion: 1\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	srv.MustCreateRepo(b, "fleet", dir)
	bare := srv.RepoPath("fleet")
	c1 := srv.Head("fleet", "main")

	// c2 and the status refs, every one applied at c1, in one git
	// fast-import run: the 10 clusters whose slices c2 changed are Behind,
	// the others in sync (nothing of theirs changed since c1).
	var in bytes.Buffer
	data := func(s string) { fmt.Fprintf(&in, "data %d\n%s\n", len(s), s) }
	now := time.Now().UTC().Truncate(time.Second) // fresh heartbeats: nobody is Unreachable
	when := now.Unix()
	fmt.Fprintf(&in, "commit refs/heads/main\ncommitter Maintainer <maintainer@example.com> %d +0000\n", when-3600)
	data("Change 10 slices")
	fmt.Fprintf(&in, "from %s\n", c1)
	for c := 0; c < 10; c++ {
		fmt.Fprintf(&in, "M 100644 inline %s\n", slice.SlicePath(ClusterName(c*97)))
		data("cluster: " + ClusterName(c*97) + "\nversion: 2\n")
	}
	in.WriteString("\n")
	for c := 0; c < n; c++ {
		name := ClusterName(c)
		doc := StatusDoc(name, "main@sha1:"+c1, 20, 1)
		doc.Heartbeat = metav1.NewTime(now)
		enc, err := status.Encode(doc)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&in, "commit %s\ncommitter %s <agent@%s.flotilla> %d +0000\n", status.RefFor(name), name, name, when)
		data("status: " + name)
		fmt.Fprintf(&in, "M 100644 inline %s\n", status.FileName)
		data(string(enc))
		in.WriteString("\n")
	}
	cmd := exec.Command("git", "--git-dir="+bare, "fast-import", "--quiet")
	cmd.Stdin = &in
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		b.Fatalf("git fast-import: %v\n%s", err, errb.String())
	}
	c2 := srv.Head("fleet", "main")
	return bare, c2
}
