package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// TestTwoAgentsOneClusterName: two agent processes configured with the
// same cluster name, in two different clusters, commit status to the same
// ref. The first one's documents stay: the second is refused (Conflict in
// its log), and the hub's reader shows the first instance only.
func TestTwoAgentsOneClusterName(t *testing.T) {
	first := agentCluster(t)
	second := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	srv := agentGit(t)
	const cluster, ns, agentNS = "twin", "twin-app", "flotilla-twin"
	dir := t.TempDir()
	writeHandSlice(t, dir, cluster, []handUnit{settingsUnit(ns, "blue")})
	if err := os.MkdirAll(filepath.Join(dir, "clusters"), 0o755); err != nil {
		t.Fatal(err)
	}
	def := "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + cluster + "\nspec:\n  kubernetesVersion: v1.36.3\n"
	if err := os.WriteFile(filepath.Join(dir, "clusters", cluster+".yaml"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := fleetrepo.New(t, srv, cluster, dir)
	creds := agentUser(t, srv, cluster)
	uid := func(c *testenv.Cluster) string {
		var kubeSystem corev1.Namespace
		if err := c.Client().Get(testCtx(t), client.ObjectKey{Name: metav1.NamespaceSystem}, &kubeSystem); err != nil {
			t.Fatal(err)
		}
		return string(kubeSystem.UID)
	}
	uidA, uidB := uid(first), uid(second)
	if uidA == uidB {
		t.Fatalf("both clusters' kube-system have UID %s", uidA)
	}
	for _, c := range []*testenv.Cluster{first, second} {
		if err := c.CreateNamespace(testCtx(t), agentNS); err != nil {
			t.Fatal(err)
		}
	}
	ref := gitserver.StatusRef(cluster)
	committed := func() (*status.ClusterStatus, string) {
		out, err := exec.Command("git", "--git-dir", srv.RepoPath(cluster), "show", ref+":"+status.FileName).Output()
		if err != nil {
			return nil, "no status on " + ref + ": " + err.Error()
		}
		doc, err := status.Decode(out)
		if err != nil {
			return nil, err.Error()
		}
		return doc, "instance " + doc.InstanceID + ", identity " + doc.Agent.Identity
	}
	args := []string{"--interval", "2s", "--heartbeat-interval", "5s"}

	a := startAgentProc(t, first, repo, cluster, agentNS, "twin-a", t.TempDir(), creds, args...)
	waitFor(t, 3*time.Minute, "the first agent's status on "+ref, func() (bool, string) {
		doc, detail := committed()
		return doc != nil && doc.InstanceID == uidA, detail
	})
	headBefore := srv.Head(cluster, "flotilla/status/"+cluster)

	b := startAgentProc(t, second, repo, cluster, agentNS, "twin-b", t.TempDir(), creds, args...)
	log := func() string {
		data, _ := os.ReadFile(b.LogPath())
		return string(data)
	}
	waitFor(t, 3*time.Minute, "the second agent refused with Conflict", func() (bool, string) {
		return strings.Contains(log(), "Conflict") && strings.Contains(log(), uidA), b.LogTail(5)
	})
	if !a.running() || !b.running() {
		t.Fatalf("running: first %v, second %v; both agents keep running", a.running(), b.running())
	}
	// The second agent reconciled its own cluster all the same.
	b.waitStatus(3*time.Minute, "the second agent's local status", func(st *status.ClusterStatus) bool {
		return st.AppliedRevision != ""
	})

	// The ref keeps the first instance's documents: the first keeps
	// heartbeating, nothing of the second's lands.
	waitFor(t, 3*time.Minute, "a heartbeat of the first agent after the refusal", func() (bool, string) {
		return srv.Head(cluster, "flotilla/status/"+cluster) != headBefore, "status ref still at " + headBefore
	})
	out, err := exec.Command("git", "--git-dir", srv.RepoPath(cluster), "log", "--format=%H", ref).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range strings.Fields(string(out)) {
		data, err := exec.Command("git", "--git-dir", srv.RepoPath(cluster), "show", c+":"+status.FileName).Output()
		if err != nil {
			t.Fatal(err)
		}
		doc, err := status.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if doc.InstanceID != uidA || doc.Agent.Identity == "twin-b" {
			t.Errorf("commit %s on %s: instance %q, identity %q; want only the first agent's (%s)", c[:12], ref, doc.InstanceID, doc.Agent.Identity, uidA)
		}
	}

	v, err := fleetview.Read(testCtx(t), fleetview.ReadOptions{Repo: srv.RepoPath(cluster), Branch: "main", Clusters: []string{cluster}})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Clusters) != 1 {
		t.Fatalf("fleetview.Read: %d clusters, want %s", len(v.Clusters), cluster)
	}
	if cv := v.Clusters[0]; cv.InstanceID != uidA || cv.State == fleetview.StateConflict {
		t.Errorf("fleetview.Read: %s instance %q, state %s; want the first instance %s, no Conflict", cv.Name, cv.InstanceID, cv.State, uidA)
	}
}
