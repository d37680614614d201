package cmd

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// TestNotifyDryRun: notify computes web's status on the head commit from
// the status refs and the rollout: pending while its canary applies and
// later waves are held, failure naming the cluster that fails it.
func TestNotifyDryRun(t *testing.T) {
	dir := rolloutWorkTree(t, "10m")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "fleet"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	head, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	srv := gitserver.Start(t, gitserver.ForgeConfig(rolloutClusters...))
	url := srv.MustCreateRepo(t, "status", dir)
	pub := publisher{t, srv, url}
	flags := []string{"notify", "--repo", dir, "--status-repo", srv.RepoPath("status"), "--dry-run", "-o", "json"}
	statusOf := func() forge.CommitStatus {
		t.Helper()
		stdout, stderr, code := runCLI(t, flags...)
		var ss []forge.CommitStatus
		if err := json.Unmarshal([]byte(stdout), &ss); code != ExitOK || err != nil || len(ss) != 1 {
			t.Fatalf("notify: exit %d %v\n%s%s", code, err, stdout, stderr)
		}
		if ss[0].Commit != strings.TrimSpace(string(head)) || ss[0].Context != "flotilla/web" {
			t.Fatalf("status on %s %s, want flotilla/web on %s", ss[0].Commit, ss[0].Context, head)
		}
		return ss[0]
	}

	pub.publish("a1", readyUnit(unitHash(t, dir, "a1"), time.Now().Add(-time.Minute)))
	if s := statusOf(); s.State != forge.StatePending || s.Description != "1/4 Ready; held at wave wave-2" {
		t.Errorf("canary Ready: %+v", s)
	}
	failing := status.UnitStatus{Hash: unitHash(t, dir, "a1"), Conditions: []metav1.Condition{{Type: status.ConditionReady,
		Status: metav1.ConditionFalse, Reason: status.ReasonHealthCheckFailed, Message: "ConfigMap/web: Failed"}}}
	pub.publish("a1", failing)
	if s := statusOf(); s.State != forge.StateFailure || s.Description != "failing on a1 (HealthCheckFailed: ConfigMap/web: Failed)" {
		t.Errorf("canary failing: %+v", s)
	}
	if _, stderr, code := runCLI(t, "notify", "--repo", dir, "--status-repo", srv.RepoPath("status"), "--forge", "bitbucket",
		"--forge-url", "https://bitbucket.org", "--forge-repo", "a/b"); code == ExitOK || !strings.Contains(stderr, `forge "bitbucket"`) {
		t.Errorf("unknown forge: exit %d %s", code, stderr)
	}
}
