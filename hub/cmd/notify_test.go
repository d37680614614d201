package cmd

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitea"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// notifyWorkTree is rolloutWorkTree committed to a Git repository of its
// own on main (head), with the status refs its agents would push on a Git
// server.
func notifyWorkTree(t *testing.T) (dir, head string, srv *gitserver.Server, pub publisher) {
	t.Helper()
	dir = rolloutWorkTree(t, "10m")
	planGit(t, dir, "init", "-q", "-b", "main")
	planGit(t, dir, "add", "-A")
	planGit(t, dir, "commit", "-qm", "fleet")
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	srv = gitserver.Start(t, gitserver.ForgeConfig(rolloutClusters...))
	url := srv.MustCreateRepo(t, "status", dir)
	return dir, strings.TrimSpace(string(out)), srv, publisher{t, srv, url}
}

// TestNotifyDryRun: notify computes web's status on the head commit from
// the status refs and the rollout: pending while its canary applies and
// later waves are held, failure naming the cluster that fails it.
func TestNotifyDryRun(t *testing.T) {
	dir, head, srv, pub := notifyWorkTree(t)
	flags := []string{"notify", "--repo", dir, "--status-repo", srv.RepoPath("status"), "--dry-run", "-o", "json"}
	statusOf := func() forge.CommitStatus {
		t.Helper()
		stdout, stderr, code := runCLI(t, flags...)
		var ss []forge.CommitStatus
		if err := json.Unmarshal([]byte(stdout), &ss); code != ExitOK || err != nil || len(ss) != 1 {
			t.Fatalf("notify: exit %d %v\n%s%s", code, err, stdout, stderr)
		}
		if ss[0].Commit != head || ss[0].Context != "flotilla/web" {
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

// TestNotifyOnGitea runs notify as the docs write it, against a real
// Gitea holding the fleet repo (its origin, reached with the token):
// web's status is set on the head commit and recorded on
// refs/flotilla/notify, and a second run sends nothing.
func TestNotifyOnGitea(t *testing.T) {
	dir, head, srv, pub := notifyWorkTree(t)
	forgeSrv := gitea.Start(t)
	forgeSrv.CreateRepo(t, "fleet")
	planGit(t, dir, "push", "-q", forgeSrv.GitURL("fleet"), "HEAD:refs/heads/main")
	planGit(t, dir, "remote", "add", "origin", forgeSrv.URL+"/"+forgeSrv.Repo("fleet")+".git")
	pub.publish("a1", readyUnit(unitHash(t, dir, "a1"), time.Now().Add(-time.Minute)))

	t.Setenv("FLOTILLA_FORGE_TOKEN", forgeSrv.Token)
	args := []string{"notify", "--repo", dir, "--status-repo", srv.RepoPath("status"),
		"--forge", "gitea", "--forge-url", forgeSrv.URL, "--forge-repo", forgeSrv.Repo("fleet"), "--dashboard-url", "https://dash.example"}
	if _, stderr, code := runCLI(t, args...); code != ExitOK || !strings.Contains(stderr, "set flotilla/web pending") {
		t.Fatalf("notify: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := runCLI(t, args...); code != ExitOK || !strings.Contains(stderr, "up to date") {
		t.Fatalf("notify again: exit %d\n%s", code, stderr)
	}
	var statuses []struct {
		Context     string `json:"context"`
		Status      string `json:"status"`
		Description string `json:"description"`
		TargetURL   string `json:"target_url"`
	}
	if err := forgeSrv.API(context.Background(), http.MethodGet, "/api/v1/repos/"+forgeSrv.Repo("fleet")+"/statuses/"+head, nil, &statuses); err != nil {
		t.Fatal(err)
	}
	if len(statuses) != 1 || statuses[0].Context != "flotilla/web" || statuses[0].Status != "pending" ||
		statuses[0].Description != "1/4 Ready; held at wave wave-2" || statuses[0].TargetURL != "https://dash.example" {
		t.Fatalf("Gitea's statuses of %s: %+v, want web's pending status once", head, statuses)
	}
	if err := forgeSrv.API(context.Background(), http.MethodGet, "/api/v1/repos/"+forgeSrv.Repo("fleet")+"/git/refs/flotilla/notify", nil, nil); err != nil {
		t.Errorf("refs/flotilla/notify not on the forge: %v", err)
	}
}
