package cmd

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
)

const leakedPassword = "hunter2-correct-horse"

// dashboardFleet is the template fleet repo with member1 in sync and
// member2 failing, whose status commit (made without the agent's writer,
// so not redacted) quotes a password.
func dashboardFleet(t *testing.T) (bare, head string) {
	t.Helper()
	srv := gitserver.Start(t, gitserver.ForgeConfig("member1", "member2", "edge-1"))
	url := srv.MustCreateRepo(t, "fleet", templateDir)
	head = srv.Head("fleet", "main")
	rev := "main@sha1:" + head
	push := func(doc *status.ClusterStatus) {
		t.Helper()
		data, err := status.Encode(doc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gitrepo.PushFiles(context.Background(), url, status.RefFor(doc.Cluster), map[string][]byte{status.FileName: data}, "status",
			gitrepo.Signature{Name: doc.Cluster}, gitrepo.PushOptions{Auth: statusdoc.AgentAuth(srv, doc.Cluster)}); err != nil {
			t.Fatal(err)
		}
	}
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	push(&status.ClusterStatus{Cluster: "member1", DesiredRevision: rev, AppliedRevision: rev, Heartbeat: now,
		Units: []status.UnitStatus{{Name: "web", AppliedRevision: rev, Conditions: []metav1.Condition{readyCondition()}}}})
	push(&status.ClusterStatus{Cluster: "member2", DesiredRevision: rev, Heartbeat: now,
		Units: []status.UnitStatus{{Name: "web", LastError: "apply: Secret db: password=" + leakedPassword, Conditions: []metav1.Condition{{
			Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: status.ReasonApplyFailed, Message: "apply: Secret db: password=" + leakedPassword,
			LastTransitionTime: now}}}}})
	return srv.RepoPath("fleet"), head
}

// TestStatusHTML: status -o html writes the page as one file, redacted,
// and --exit-code still judges the fleet.
func TestStatusHTML(t *testing.T) {
	bare, head := dashboardFleet(t)
	stdout, stderr, code := runCLI(t, "status", "--repo", bare, "-o", "html", "--exit-code", "--commit-url", "https://git.example.com/fleet/commit/{sha}")
	if code != ExitUnhealthy || !strings.Contains(stderr, "unhealthy: member2 Failing") {
		t.Errorf("exit %d, want %d\n%s", code, ExitUnhealthy, stderr)
	}
	for _, want := range []string{
		"<!DOCTYPE html>", `data-cluster="member1" data-state="InSync"`, `data-cluster="member2" data-state="Failing"`,
		`data-cluster="edge-1" data-state="NoStatus"`, "password=" + redact.Mask, `href="https://git.example.com/fleet/commit/` + head + `"`,
		"A snapshot; it does not refresh.",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(stdout, leakedPassword) {
		t.Errorf("the page shows the password")
	}
	if strings.Contains(stdout, "<script src") || strings.Contains(stdout, "<link") {
		t.Errorf("the page loads something from elsewhere")
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"status", "--repo", bare, "-o", "html", "--watch"}, "flotilla dashboard"},
		{[]string{"status", "jobs", "--repo", bare, "-o", "html"}, "flotilla status -o html"},
	}
	for _, tt := range tests {
		if _, stderr, code := runCLI(t, tt.args...); code != ExitError || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, want %d naming %q\n%s", tt.args, code, ExitError, tt.want, stderr)
		}
	}
}

// TestDashboardCommand serves the fleet on a free port and stops with its
// context.
func TestDashboardCommand(t *testing.T) {
	bare, _ := dashboardFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	root := NewRootCommand()
	root.SetOut(pw)
	root.SetErr(pw)
	root.SetArgs([]string{"dashboard", "--repo", bare, "--listen", "127.0.0.1:0", "--refresh", "1s"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no first line: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	url, ok := strings.CutPrefix(strings.Fields(line)[1], "http://")
	if !ok || !strings.HasPrefix(line, "dashboard: ") {
		t.Fatalf("first line %q", line)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for path, want := range map[string]string{
		"":           `data-fragment="fragment" data-interval="1"`,
		"fragment":   `data-cluster="member2" data-state="Failing"`,
		"fleet.json": `"name":"member1","state":"InSync"`,
		"healthz":    "ok",
		"metrics":    "flotilla_dashboard_last_read_timestamp_seconds ",
	} {
		resp, err := client.Get("http://" + url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("/%s: %d, want 200 with %q", path, resp.StatusCode, want)
		}
		if strings.Contains(string(body), leakedPassword) {
			t.Errorf("/%s shows the password", path)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("dashboard after its context ended: %v", err)
	}
	if _, stderr, code := runCLI(t, "dashboard", "--repo", bare, "--refresh", "0s"); code != ExitError || !strings.Contains(stderr, "--refresh") {
		t.Errorf("--refresh 0: exit %d\n%s", code, stderr)
	}
}
