package cmd

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// TestStatusCommand runs `flotilla status` and `status rollout` on the
// template fleet repo with one agent's status committed by the real writer.
func TestStatusCommand(t *testing.T) {
	srv := gitserver.Start(t, gitserver.ForgeConfig("member1", "member2", "edge-1"))
	url := srv.MustCreateRepo(t, "fleet", templateDir)
	bare := srv.RepoPath("fleet")
	head := srv.Head("fleet", "main")
	rev := "main@sha1:" + head

	w, err := status.NewWriter(status.WriterOptions{
		Cluster: "member1", URL: url, HeartbeatInterval: 30 * time.Second,
		Auth: gitrepo.Auth{Username: gitserver.AgentUser("member1"), Password: srv.Password(gitserver.AgentUser("member1"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	doc := &status.ClusterStatus{Cluster: "member1", DesiredRevision: rev, AppliedRevision: rev,
		Units: []status.UnitStatus{{Name: "web", AppliedRevision: rev}}}
	doc.Units[0].Conditions = append(doc.Units[0].Conditions, readyCondition())
	if err := w.Publish(context.Background(), doc); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := runCLI(t, "status", "--repo", bare, "-o", "json")
	if code != ExitOK {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	var v status.FleetView
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	states := map[string]status.State{}
	for _, c := range v.Clusters {
		states[c.Name] = c.State
	}
	if states["member1"] != status.StateInSync || states["member2"] != status.StateNoStatus || states["edge-1"] != status.StateNoStatus {
		t.Errorf("states: %v", states)
	}

	stdout, stderr, code = runCLI(t, "status", "--repo", bare, "--cluster", "member1")
	if code != ExitOK || !strings.Contains(stdout, "member1") || !strings.Contains(stdout, "InSync") || strings.Contains(stdout, "member2") {
		t.Errorf("status --cluster member1: exit %d\n%s%s", code, stdout, stderr)
	}

	stdout, stderr, code = runCLI(t, "status", "rollout", "--repo", bare, "-o", "markdown")
	if code != ExitOK || !strings.Contains(stdout, "### Rollout of `"+head[:12]+"`") || !strings.Contains(stdout, "| member1 |") {
		t.Errorf("status rollout: exit %d\n%s%s", code, stdout, stderr)
	}

	_, stderr, code = runCLI(t, "status", "--repo", bare, "-o", "xml")
	if code != ExitError || !strings.Contains(stderr, "--output") {
		t.Errorf("a bad format: exit %d, %s", code, stderr)
	}
	_, stderr, code = runCLI(t, "status", "--repo", bare, "--status-repo", "https://x/{shard}.git", "--status-shards", "0")
	if code != ExitError || !strings.Contains(stderr, "--status-shards") {
		t.Errorf("zero shards: exit %d, %s", code, stderr)
	}
}

func readyCondition() metav1.Condition {
	return metav1.Condition{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSucceeded, LastTransitionTime: metav1.Now()}
}
