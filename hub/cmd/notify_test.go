package cmd

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/hub/notify"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitea"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/treefile"
	"github.com/flotilla-gitops/flotilla/test/webhookrecv"
)

// notifyWorkTree is rolloutWorkTree committed to a Git repository of its
// own on main (head), with the status refs its agents would push on a Git
// server.
func notifyWorkTree(t *testing.T, extra map[string]string) (dir, head string, srv *gitserver.Server, pub publisher) {
	t.Helper()
	dir = rolloutWorkTree(t, "10m")
	treefile.Write(t, dir, extra)
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
	dir, head, srv, pub := notifyWorkTree(t, nil)
	flags := []string{"notify", "--repo", dir, "--status-repo", srv.RepoPath("status"), "--dry-run", "-o", "json"}
	statusOf := func() forge.CommitStatus {
		t.Helper()
		stdout, stderr, code := runCLI(t, flags...)
		var n notification
		err := json.Unmarshal([]byte(stdout), &n)
		ss := n.Statuses
		if code != ExitOK || err != nil || len(ss) != 1 {
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
	if s := statusOf(); s.State != forge.StateFailure || s.Description != "failing on a1; held at wave wave-2 (rollout failed): HealthCheckFailed: ConfigMap/web: Failed" {
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
	dir, head, srv, pub := notifyWorkTree(t, nil)
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

// TestNotifyWebhooks: events from the fleet repo's Providers and Alerts
// reach a generic-hmac receiver that checks the signature, and a Slack
// webhook whose URL is a secret, each once across runs (each run a new
// process state: only refs/flotilla/notify remembers); a send the
// receiver fails is told again by the next run; an alert of severity
// error gets no recovery; the secrets show in no output.
func TestNotifyWebhooks(t *testing.T) {
	const hmacKey = "hmac-key-of-the-ops-hook"
	ops := webhookrecv.Start(t, hmacKey)
	slack := webhookrecv.Start(t, "")
	slackURL := slack.URL + "/services/T000/B000/secret-slack-path"

	dir, _, srv, pub := notifyWorkTree(t, map[string]string{
		"notifications/providers/ops.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Provider\nmetadata:\n  name: ops\nspec:\n  type: generic-hmac\n" +
			"  address: " + ops.URL + "/events\n  secretRef: {name: ops-hook}\n",
		"notifications/providers/slack.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Provider\nmetadata:\n  name: slack\nspec:\n  type: slack\n" +
			"  channel: fleet\n  secretRef: {name: slack}\n",
		"notifications/alerts/prod.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Alert\nmetadata:\n  name: prod\nspec:\n" +
			"  providerRef: {name: ops}\n  eventSources: [{kind: Fleet, name: prod}, {kind: Application, name: web}]\n",
		"notifications/alerts/errors.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Alert\nmetadata:\n  name: errors\nspec:\n" +
			"  providerRef: {name: slack}\n  eventSeverity: error\n",
	})
	if _, stderr, code := runCLI(t, "validate", "--repo", dir); code != ExitOK {
		t.Fatalf("validate: %s", stderr)
	}
	creds := t.TempDir()
	treefile.Write(t, creds, map[string]string{"slack/address": slackURL + "\n"})
	gitCreds := t.TempDir()
	treefile.Write(t, gitCreds, map[string]string{"username": gitserver.Maintainer, "password": srv.Password(gitserver.Maintainer)})
	planGit(t, dir, "remote", "add", "origin", srv.URL("status"))
	t.Setenv(notify.SecretEnv("ops-hook", "token"), hmacKey)

	run := func(wantOK bool) string {
		t.Helper()
		_, stderr, code := runCLI(t, "notify", "--repo", dir, "--status-repo", srv.RepoPath("status"),
			"--git-credentials-dir", gitCreds, "--credentials-dir", creds)
		if (code == ExitOK) != wantOK {
			t.Fatalf("notify: exit %d, want ok %v\n%s", code, wantOK, stderr)
		}
		for _, secret := range []string{hmacKey, "secret-slack-path"} {
			if strings.Contains(stderr, secret) {
				t.Fatalf("notify's output shows a secret:\n%s", stderr)
			}
		}
		return stderr
	}

	// The canary fails: the cluster turns Failing and the rollout is held.
	failing := status.UnitStatus{Hash: unitHash(t, dir, "a1"), Conditions: []metav1.Condition{{Type: status.ConditionReady,
		Status: metav1.ConditionFalse, Reason: status.ReasonHealthCheckFailed, Message: "ConfigMap/web: Failed"}}}
	pub.publish("a1", failing)
	run(true)
	want := []string{"Failing Cluster/a1", "WaveHeld Application/web"}
	if got := ops.Received(); !slices.Equal(got, want) {
		t.Fatalf("ops received %v, want %v", got, want)
	}
	if got := slack.Received(); len(got) != 2 {
		t.Fatalf("slack received %v, want both errors", slack.Bodies())
	}
	msg := slack.Bodies()[0]
	att := msg["attachments"].([]any)[0].(map[string]any)
	if msg["channel"] != "fleet" || att["color"] != "danger" || att["title"] != "Failing: Cluster/a1" ||
		!strings.Contains(att["text"].(string), "cluster a1 is Failing") {
		t.Errorf("slack message: %v", msg)
	}
	if e := ops.Events()[0]; e.Severity != "error" || e.Controller != "flotilla-notify" || e.Metadata["fleets"] != "prod" {
		t.Errorf("ops event: %+v", e)
	}

	// Nothing changed: a second run tells nothing.
	if stderr := run(true); strings.Contains(stderr, "told") {
		t.Errorf("second run told again:\n%s", stderr)
	}

	// The canary recovers while the receiver fails: the run fails, naming
	// the provider, and the next run tells the recovery, once.
	ops.FailNext()
	pub.publish("a1", readyUnit(unitHash(t, dir, "a1"), time.Now().Add(-time.Minute)))
	if stderr := run(false); !strings.Contains(stderr, "provider ops: HTTP 500") {
		t.Errorf("failed send: %s", stderr)
	}
	run(true)
	run(true)
	want = append(want, "Recovered Cluster/a1")
	if got := ops.Received(); !slices.Equal(got, want) {
		t.Errorf("ops received %v, want %v", got, want)
	}
	if got := slack.Received(); len(got) != 2 {
		t.Errorf("slack (errors only) received %v", got)
	}
	if n := ops.Refused(); n > 0 {
		t.Errorf("%d sends to ops were not signed with its key", n)
	}
}

// TestTemplateReadmeNotifications: the Provider and Alert the template's
// README shows under "Hearing back", added to the template as its
// comments name them, validate.
func TestTemplateReadmeNotifications(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(templateDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Hearing back\n")
	if !ok {
		t.Fatal("the template's README has no Hearing back section")
	}
	_, block, _ := strings.Cut(section, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	dir := copyTree(t, templateDir)
	files := 0
	for _, doc := range strings.Split(block, "---\n") {
		first, _, _ := strings.Cut(doc, "\n")
		name, ok := strings.CutPrefix(first, "# ")
		if !ok {
			t.Fatalf("a document of the example does not name its file: %q", first)
		}
		treefile.WriteFile(t, filepath.Join(dir, filepath.FromSlash(name)), doc)
		files++
	}
	if files != 2 {
		t.Fatalf("the example has %d documents, want a Provider and an Alert", files)
	}
	if _, stderr, code := runCLI(t, "validate", "--repo", dir); code != ExitOK {
		t.Fatalf("validate with the README's notifications: exit %d\n%s", code, stderr)
	}
}
