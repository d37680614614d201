package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/cijob"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
)

var rolloutClusters = []string{"a1", "b2", "c3", "d4"}

// rolloutWorkTree is a fleet repo whose app web rolls out to a1, then b2
// and c3, then d4, rendered once (first deployment) and then changed and
// rendered again (wave 1 released).
func rolloutWorkTree(t *testing.T, bake string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"fleets/prod.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters: [a1, b2, c3, d4]\n" +
			"  rollout:\n    bake: " + bake + "\n    waves:\n      - {name: canary, clusters: [a1]}\n      - {clusters: [b2, c3]}\n",
		"apps/web/app.yaml":          "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n  source: {manifests: {path: manifests}}\n  syncPolicies: [{destination: {fleet: prod}}]\n",
		"apps/web/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {version: v1}\n",
	}
	for _, c := range rolloutClusters {
		files["clusters/"+c+".yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + c + "\n"
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, code := runCLI(t, "render", "--repo", dir); code != ExitOK {
		t.Fatalf("render: %s", stderr)
	}
	editFile(t, filepath.Join(dir, "apps/web/manifests/cm.yaml"), "v1", "v2")
	if _, stderr, code := runCLI(t, "render", "--repo", dir); code != ExitOK {
		t.Fatalf("render: %s", stderr)
	}
	return dir
}

func unitHash(t *testing.T, dir, cluster string) string {
	t.Helper()
	s, err := slice.Read(dir, cluster)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range s.Units {
		if u.Name == "web" {
			return u.Hash
		}
	}
	t.Fatalf("%s has no unit web", cluster)
	return ""
}

// publisher commits status documents as the clusters' agents would, with
// the real status writer, to the status refs of a repo on a real Git
// server.
type publisher struct {
	t   *testing.T
	srv *gitserver.Server
	url string
}

func (p publisher) publish(cluster string, unit status.UnitStatus) {
	p.t.Helper()
	w, err := statuswriter.NewWriter(statuswriter.WriterOptions{
		Cluster: cluster, URL: p.url, HeartbeatInterval: 30 * time.Second,
		Auth: statusdoc.AgentAuth(p.srv, cluster),
	})
	if err != nil {
		p.t.Fatal(err)
	}
	unit.Name = "web"
	if err := w.Publish(context.Background(), &status.ClusterStatus{Cluster: cluster, Units: []status.UnitStatus{unit}}); err != nil {
		p.t.Fatal(err)
	}
}

// readyUnit is Ready at hash since since; by its condition it has been
// Ready for a day (a healthy cluster that got new content).
func readyUnit(hash string, since time.Time) status.UnitStatus {
	at := metav1.NewTime(since)
	return status.UnitStatus{Hash: hash, ReadyHash: hash, ReadySince: &at, ReadyHashes: []string{hash},
		Conditions: []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionTrue,
			Reason: status.ReasonSucceeded, LastTransitionTime: metav1.NewTime(since.Add(-24 * time.Hour))}}}
}

func readState(t *testing.T, dir string) *rollout.State {
	t.Helper()
	st, err := fleetrender.CommittedAt(dir).State("web")
	if err != nil || st == nil {
		t.Fatalf("state: %v %v", st, err)
	}
	return st
}

// TestRolloutAbortCommand: abort gives the released wave its previous unit
// back; a new revision starts a new rollout from wave 1.
func TestRolloutAbortCommand(t *testing.T) {
	dir := rolloutWorkTree(t, "1m")
	old := unitHash(t, dir, "b2")
	if unitHash(t, dir, "a1") == old {
		t.Fatal("wave 1 did not get the change")
	}
	stdout, stderr, code := runCLI(t, "rollout", "abort", "web", "--repo", dir)
	if code != ExitOK || !strings.Contains(stdout, "rollout of web: abort") {
		t.Fatalf("abort: exit %d\n%s%s", code, stdout, stderr)
	}
	if unitHash(t, dir, "a1") != old || !readState(t, dir).Aborted {
		t.Fatal("abort did not give a1 its previous unit back")
	}
	stdout, _, code = runCLI(t, "rollout", "advance", "--repo", dir)
	if code != ExitChanges || !strings.Contains(stdout, "web: aborted") {
		t.Fatalf("advance after abort: exit %d\n%s", code, stdout)
	}
	editFile(t, filepath.Join(dir, "apps/web/manifests/cm.yaml"), "v2", "v3")
	if _, stderr, code := runCLI(t, "render", "--repo", dir); code != ExitOK {
		t.Fatal(stderr)
	}
	if st := readState(t, dir); st.Aborted || st.Released != 1 || unitHash(t, dir, "a1") == old || unitHash(t, dir, "b2") != old {
		t.Fatalf("a fix after abort: %+v", st)
	}
}

// TestRolloutAbortAfterAFailedRevision: a change fails on the canary and
// stays there; the fix starts a new rollout and reaches wave-2. Abort
// gives the canary its last unit Ready there (v1), not the failed v2 it
// had when the fix's rollout started, and says so; a cluster without
// status gets its unit from the start.
func TestRolloutAbortAfterAFailedRevision(t *testing.T) {
	dir := rolloutWorkTree(t, "0s") // v1 everywhere, v2 on a1
	srv := gitserver.Start(t, gitserver.ForgeConfig(rolloutClusters...))
	url := srv.MustCreateRepo(t, "status", dir)
	pub := publisher{t, srv, url}
	flags := []string{"--repo", dir, "--status-repo", srv.RepoPath("status")}
	v1, v2 := unitHash(t, dir, "b2"), unitHash(t, dir, "a1")
	failedAt := func(hash string, ready ...string) status.UnitStatus {
		return status.UnitStatus{Hash: hash, ReadyHashes: ready, Conditions: []metav1.Condition{{Type: status.ConditionReady,
			Status: metav1.ConditionFalse, Reason: status.ReasonApplyFailed, Message: "admission denied", LastTransitionTime: metav1.Now()}}}
	}
	pub.publish("a1", failedAt(v2, v1))

	// The fix: a new rollout, released to wave-2 once a1 is Ready on it.
	editFile(t, filepath.Join(dir, "apps/web/manifests/cm.yaml"), "v2", "v3")
	if _, stderr, code := runCLI(t, "render", "--repo", dir); code != ExitOK {
		t.Fatal(stderr)
	}
	v3 := unitHash(t, dir, "a1")
	if st := readState(t, dir); st.Previous["a1"] != v2 || len(st.Earlier["a1"]) != 1 || st.Earlier["a1"][0] != v1 {
		t.Fatalf("the fix's rollout does not keep a1's v1: %+v", st)
	}
	ready := readyUnit(v3, time.Now().Add(-time.Hour))
	ready.ReadyHashes = []string{v3, v1}
	pub.publish("a1", ready)
	if stdout, stderr, code := runCLI(t, append([]string{"rollout", "advance"}, flags...)...); code != ExitOK {
		t.Fatalf("advance: exit %d\n%s%s", code, stdout, stderr)
	}
	pub.publish("b2", failedAt(v3, v1))
	if unitHash(t, dir, "b2") != v3 || unitHash(t, dir, "c3") != v3 {
		t.Fatal("wave-2 did not get the fix")
	}

	// c3 has no status: it gets what it had when the rollout started.
	stdout, stderr, code := runCLI(t, append([]string{"rollout", "abort", "web"}, flags...)...)
	short := func(h string) string { return strings.TrimPrefix(h, "sha256:")[:12] }
	for _, want := range []string{
		"a1 gets unit " + short(v1) + " (its last unit Ready there)",
		"b2 gets unit " + short(v1) + " (its last unit Ready there)",
		"c3 gets unit " + short(v1) + " (no trusted status: the unit it had when the rollout started)",
	} {
		if code != ExitOK || !strings.Contains(stdout, want) {
			t.Errorf("abort: exit %d, want %q:\n%s%s", code, want, stdout, stderr)
		}
	}
	for _, c := range []string{"a1", "b2", "c3", "d4"} {
		if got := unitHash(t, dir, c); got != v1 {
			t.Errorf("%s after abort: unit %s, want v1 %s (v2 is %s, v3 %s)", c, got, v1, v2, v3)
		}
	}
	st := readState(t, dir)
	if !st.Aborted || st.Restore["a1"] != v1 || !strings.Contains(st.Reason, "a1 gets unit "+short(v1)) {
		t.Errorf("state after abort: %+v", st)
	}
	if _, _, code := runCLI(t, "render", "--check", "--repo", dir); code != ExitOK {
		t.Error("rendered/ after abort is not what render writes")
	}
}

// TestRolloutCommands drives rollout status, advance, pause and resume and
// render --all-waves against status committed to a real Git server.
func TestRolloutCommands(t *testing.T) {
	dir := rolloutWorkTree(t, "10m")
	srv := gitserver.Start(t, gitserver.ForgeConfig(rolloutClusters...))
	url := srv.MustCreateRepo(t, "status", dir)
	bare := srv.RepoPath("status")
	pub := publisher{t, srv, url}
	flags := []string{"--repo", dir, "--status-repo", bare}

	if st := readState(t, dir); st.Released != 1 || st.Waves != 3 {
		t.Fatalf("after the change: %+v", st)
	}
	held := unitHash(t, dir, "b2")

	// Nothing reported yet: advance releases nothing and says why.
	stdout, stderr, code := runCLI(t, append([]string{"rollout", "advance"}, flags...)...)
	if code != ExitChanges || !strings.Contains(stdout, "web: wave canary is not Ready: a1 Pending: no status reported") {
		t.Fatalf("advance without status: exit %d\n%s%s", code, stdout, stderr)
	}

	// Ready for a minute of a 10m bake: still baking.
	pub.publish("a1", readyUnit(unitHash(t, dir, "a1"), time.Now().Add(-time.Minute)))
	stdout, _, code = runCLI(t, append([]string{"rollout", "advance"}, flags...)...)
	if code != ExitChanges || !strings.Contains(stdout, "wave canary is baking: a1 (Ready at the revision for 1m") {
		t.Fatalf("advance while baking: exit %d\n%s", code, stdout)
	}

	// Ready for an hour: wave-2 goes.
	pub.publish("a1", readyUnit(unitHash(t, dir, "a1"), time.Now().Add(-time.Hour)))
	stdout, stderr, code = runCLI(t, append([]string{"rollout", "status", "-o", "json"}, flags...)...)
	var ps []rollout.Progress
	if err := json.Unmarshal([]byte(stdout), &ps); code != ExitOK || err != nil || len(ps) != 1 {
		t.Fatalf("status: exit %d %v\n%s%s", code, err, stdout, stderr)
	}
	if w := ps[0].Waves; w[0].Clusters[0].Phase != rollout.PhaseReady || w[1].Clusters[0].Phase != rollout.PhaseHeld || ps[0].Release != 2 {
		t.Fatalf("status: %+v", ps[0])
	}
	msgFile := filepath.Join(t.TempDir(), "msg")
	stdout, stderr, code = runCLI(t, append([]string{"rollout", "advance", "--message-file", msgFile}, flags...)...)
	if code != ExitOK || !regexp.MustCompile(`web: rollout advance: wave wave-2 released: every cluster of wave canary Ready at the revision for at least 10m0s \(bake\): a1 \(Ready at the revision for 1h0m[0-9]+s, since `).MatchString(stdout) {
		t.Fatalf("advance: exit %d\n%s%s", code, stdout, stderr)
	}
	if msg, err := os.ReadFile(msgFile); err != nil || string(msg) != stdout {
		t.Errorf("message file %q, err %v", msg, err)
	}
	if st := readState(t, dir); st.Released != 2 {
		t.Fatalf("state after advance: %+v", st)
	}
	if unitHash(t, dir, "b2") == held || unitHash(t, dir, "b2") != unitHash(t, dir, "a1") || unitHash(t, dir, "d4") != held {
		t.Fatal("advance did not give wave-2, and only wave-2, the new revision")
	}
	if _, _, code := runCLI(t, "render", "--check", "--repo", dir); code != ExitOK {
		t.Error("rendered/ after advance is not what render writes")
	}

	// Idempotent; then one Failed cluster holds the rollout.
	stdout, _, code = runCLI(t, append([]string{"rollout", "advance"}, flags...)...)
	if code != ExitChanges || !strings.Contains(stdout, "wave wave-2 is not Ready: b2 Pending") {
		t.Fatalf("advance again: exit %d\n%s", code, stdout)
	}
	pub.publish("b2", status.UnitStatus{Hash: unitHash(t, dir, "b2"), Conditions: []metav1.Condition{{Type: status.ConditionReady,
		Status: metav1.ConditionFalse, Reason: status.ReasonApplyFailed, Message: "ConfigMap web: admission denied", LastTransitionTime: metav1.Now()}}})
	pub.publish("c3", readyUnit(unitHash(t, dir, "c3"), time.Now().Add(-time.Hour)))
	stdout, _, code = runCLI(t, append([]string{"rollout", "advance"}, flags...)...)
	if code != ExitChanges || !strings.Contains(stdout, "wave wave-2 has 1 Failed cluster(s), more than maxFailures 0: b2 (ApplyFailed: ConfigMap web: admission denied)") {
		t.Fatalf("advance with a failure: exit %d\n%s", code, stdout)
	}
	stdout, _, _ = runCLI(t, append([]string{"rollout", "status", "web"}, flags...)...)
	for _, want := range []string{"wave-2  b2       Failed", "rest    d4       Held", "next: wave wave-2 has 1 Failed"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status table lacks %q:\n%s", want, stdout)
		}
	}

	// Pause holds a rollout that could go; resume lets it.
	pub.publish("b2", readyUnit(unitHash(t, dir, "b2"), time.Now().Add(-time.Hour)))
	if _, stderr, code := runCLI(t, append([]string{"rollout", "pause", "web"}, flags...)...); code != ExitOK {
		t.Fatalf("pause: %s", stderr)
	}
	stdout, _, code = runCLI(t, append([]string{"rollout", "advance"}, flags...)...)
	if code != ExitChanges || !strings.Contains(stdout, "web: paused") || !readState(t, dir).Paused {
		t.Fatalf("advance while paused: exit %d\n%s", code, stdout)
	}
	if _, stderr, code := runCLI(t, append([]string{"rollout", "resume", "web"}, flags...)...); code != ExitOK {
		t.Fatalf("resume: %s", stderr)
	}
	if stdout, _, code = runCLI(t, append([]string{"rollout", "advance"}, flags...)...); code != ExitOK || readState(t, dir).Released != 3 {
		t.Fatalf("advance after resume: exit %d\n%s", code, stdout)
	}
	if unitHash(t, dir, "d4") != unitHash(t, dir, "a1") {
		t.Error("the last wave did not get the revision")
	}
	stdout, _, code = runCLI(t, append([]string{"rollout", "advance"}, flags...)...)
	if code != ExitChanges || !strings.Contains(stdout, "web: complete") {
		t.Fatalf("advance when complete: exit %d\n%s", code, stdout)
	}

	// --all-waves in an emergency: loud, and recorded.
	editFile(t, filepath.Join(dir, "apps/web/manifests/cm.yaml"), "v2", "v3")
	_, stderr, code = runCLI(t, "render", "--all-waves", "--repo", dir)
	if code != ExitOK || !strings.Contains(stderr, "WARNING: --all-waves") {
		t.Fatalf("render --all-waves: exit %d\n%s", code, stderr)
	}
	if st := readState(t, dir); st.Released != 3 || !strings.Contains(st.Reason, "--all-waves") || unitHash(t, dir, "d4") != unitHash(t, dir, "a1") {
		t.Fatalf("after --all-waves: %+v", st)
	}

	if _, stderr, code := runCLI(t, append([]string{"rollout", "pause", "nope"}, flags...)...); code != ExitError || !strings.Contains(stderr, "nope has no rollout") {
		t.Errorf("pause of an unknown app: exit %d %s", code, stderr)
	}
}

// TestRolloutDueCommand: due exits 0 while a rollout may release a wave
// within --within (waiting on a report, or a bake that ends in time) and
// 1 when none may (a bake that ends later, a paused rollout).
func TestRolloutDueCommand(t *testing.T) {
	dir := rolloutWorkTree(t, "10m")
	srv := gitserver.Start(t, gitserver.ForgeConfig(rolloutClusters...))
	pub := publisher{t, srv, srv.MustCreateRepo(t, "status", dir)}
	flags := []string{"--repo", dir, "--status-repo", srv.RepoPath("status")}
	steps := []struct {
		name   string
		before func()
		within string
		code   int
		out    string
	}{
		{"no report yet", nil, "0s", ExitOK, "web: due, Waiting: wave canary is not Ready: a1 Pending"},
		{"bake ends after the window", func() { pub.publish("a1", readyUnit(unitHash(t, dir, "a1"), time.Now().Add(-time.Minute))) }, "5m", ExitChanges,
			"web: not due, Baking: wave canary is baking: a1 (Ready at the revision for 1m"},
		{"bake ends inside the window", nil, "10m", ExitOK, "web: due, Baking"},
		{"paused", func() {
			if _, stderr, code := runCLI(t, append([]string{"rollout", "pause", "web"}, flags...)...); code != ExitOK {
				t.Fatalf("pause: %s", stderr)
			}
		}, "1h", ExitChanges, "nothing due within 1h0m0s\n  web: not due, Paused"},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		stdout, stderr, code := runCLI(t, append([]string{"rollout", "due", "--within", st.within}, flags...)...)
		if code != st.code || !strings.Contains(stdout, st.out) {
			t.Errorf("%s: exit %d, want %d with %q\n%s%s", st.name, code, st.code, st.out, stdout, stderr)
		}
	}
	stdout, _, code := runCLI(t, append([]string{"rollout", "due", "-o", "json"}, flags...)...)
	if code != ExitChanges || !strings.Contains(stdout, `"application": "web"`) || !strings.Contains(stdout, `"state": "Paused"`) || !strings.Contains(stdout, `"due": false`) {
		t.Errorf("due -o json: exit %d\n%s", code, stdout)
	}
}

// TestTemplateRolloutCI runs the template's rollout jobs — the GitHub
// workflow's Advance step and the GitLab job's script — as written there,
// in a fresh clone against the real Git smart-HTTP server, while status
// documents are pushed as agents push them. Started by the merge (a push),
// the job follows the status refs: it releases each wave (bake 0) a moment
// after the wave before reports Ready, one advance commit per wave by the
// job's identity, a status push with nothing to release commits nothing,
// and it ends by itself once the rollout is complete. A scheduled run with
// nothing to release then ends at once. The triggers: a push to main that
// changes rendered/ (not the job's own pushes), the schedule kept
// as the fallback, one run at a time.
func TestTemplateRolloutCI(t *testing.T) {
	cli, cliEnv := cijob.CLIOnPath(t, "flotilla")
	// gh, as the GitHub job calls it: each call is logged.
	gh := filepath.Join(cli, "gh")
	if err := os.WriteFile(gh, []byte("#!/bin/sh\necho \"$*\" >> \"$GH_LOG\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := gitserver.Start(t, gitserver.ForgeConfig(rolloutClusters...))
	const token = "rollout-token"
	if err := srv.AddUser("oauth2", token, gitserver.Rule{User: "oauth2", Refs: []string{"refs/heads/main"}}); err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		file   string
		script func(t *testing.T, doc map[string]any) string
		vars   func(doc map[string]any) []string
		event  func(event string) []string
		author string
	}{
		{".github/workflows/flotilla-rollout.yml", githubStep("advance", "Advance"), cijob.GitHubEnv,
			func(event string) []string { return []string{"EVENT=" + event, "GITHUB_RUN_ID=1"} }, "flotilla-rollout[bot]"},
		{".gitlab/flotilla-rollout.yml", gitlabScript("flotilla-rollout"), func(doc map[string]any) []string { return cijob.GitLabVariables(doc, "flotilla-rollout") },
			func(event string) []string { return []string{"CI_PIPELINE_SOURCE=" + event, "CI_PIPELINE_ID=1"} }, "flotilla-rollout"},
	}
	for i, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			doc, err := cijob.Load(filepath.Join(templateDir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			checkRolloutTriggers(t, tc.file, doc)
			script := tc.script(t, doc)
			for _, want := range []string{"flotilla rollout advance --message-file rollout-message.txt", "flotilla rollout due --within"} {
				if !strings.Contains(script, want) {
					t.Fatalf("%s does not run %q", tc.file, want)
				}
			}

			dir := rolloutWorkTree(t, "0s")
			repo := "fleet-" + string(rune('a'+i))
			url := srv.MustCreateRepo(t, repo, dir)
			pub := publisher{t, srv, url}
			ghLog := filepath.Join(t.TempDir(), "gh.log")
			env := append(append(os.Environ(), cliEnv...), "GH_LOG="+ghLog,
				"HOME="+t.TempDir(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
			env = append(env, tc.vars(doc)...)
			env = append(env, "FLOTILLA_ROLLOUT_FOLLOW=120", "FLOTILLA_ROLLOUT_POLL=1", "CI_SERVER_PROTOCOL=http", "CI_SERVER_HOST="+host,
				"CI_SERVER_PORT="+port, "CI_PROJECT_PATH="+repo, "CI_DEFAULT_BRANCH=main", "FLOTILLA_ROLLOUT_TOKEN="+token)
			job := func(event string) (string, time.Duration, error) {
				t.Helper()
				clone := filepath.Join(t.TempDir(), "clone")
				runIn(t, "", env, "git", "clone", "-q", "--branch", "main", srv.UserURL(repo, gitserver.Maintainer), clone)
				start := time.Now()
				out, err := cijob.Run(context.Background(), clone, script, append(env, tc.event(event)...))
				return out, time.Since(start), err
			}
			// main as the server has it.
			watch := filepath.Join(t.TempDir(), "watch")
			runIn(t, "", env, "git", "clone", "-q", "--branch", "main", srv.UserURL(repo, gitserver.Maintainer), watch)
			waitReleased := func(n int) {
				t.Helper()
				deadline := time.Now().Add(60 * time.Second)
				for {
					runIn(t, watch, env, "git", "pull", "-q", "--ff-only")
					if readState(t, watch).Released == n {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("main's rollout of web is not at %d released waves: %+v", n, readState(t, watch))
					}
					time.Sleep(200 * time.Millisecond)
				}
			}

			type result struct {
				out  string
				took time.Duration
				err  error
			}
			done := make(chan result, 1)
			go func() {
				out, took, err := job("push")
				done <- result{out, took, err}
			}()
			// A held cluster's heartbeat: a round that releases nothing.
			pub.publish("d4", readyUnit(unitHash(t, dir, "d4"), time.Now().Add(-time.Hour)))
			pub.publish("a1", readyUnit(unitHash(t, dir, "a1"), time.Now()))
			waitReleased(2)
			for _, c := range []string{"b2", "c3"} {
				pub.publish(c, readyUnit(unitHash(t, watch, c), time.Now()))
			}
			waitReleased(3)
			released := time.Now()
			var r result
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the job still follows the status refs of a complete rollout")
			}
			if r.err != nil {
				t.Fatalf("job: %v\n%s", r.err, r.out)
			}
			t.Logf("job ran %s, ended %s after the last release", r.took.Round(time.Millisecond), time.Since(released).Round(time.Millisecond))
			for _, want := range []string{"web: rollout advance: wave wave-2 released", "web: rollout advance: wave rest released", "nothing due within"} {
				if !strings.Contains(r.out, want) {
					t.Errorf("the job's log lacks %q:\n%s", want, r.out)
				}
			}
			runIn(t, watch, env, "git", "pull", "-q", "--ff-only")
			authors := gitIn(t, filepath.Join(watch, ".git"), "log", "--format=%an <%ae>|%s", "HEAD~2..HEAD")
			lines := strings.Split(authors, "\n")
			if len(lines) != 2 || gitIn(t, filepath.Join(watch, ".git"), "rev-list", "--count", "HEAD") != "3" {
				t.Fatalf("main after the rollout, want the merge and two advance commits:\n%s", gitIn(t, filepath.Join(watch, ".git"), "log", "--format=%an|%s"))
			}
			for _, l := range lines {
				if !strings.HasPrefix(l, tc.author+" <") || !strings.HasSuffix(l, "|flotilla rollout advance") {
					t.Errorf("advance commit %q, want one by %s", l, tc.author)
				}
			}
			if job, ok := doc["flotilla-rollout"].(map[string]any); ok {
				// GitLab: the rule that keeps the job's own pushes from
				// starting it matches its commits ($CI_COMMIT_AUTHOR).
				rules, _ := job["rules"].([]any)
				first, _ := rules[0].(map[string]any)
				m := regexp.MustCompile(`=~ /(.*)/`).FindStringSubmatch(fmt.Sprint(first["if"]))
				if author, _, _ := strings.Cut(lines[0], "|"); m == nil || !regexp.MustCompile(m[1]).MatchString(author) {
					t.Errorf("the rule %v does not match the job's commits by %s", first["if"], author)
				}
			}
			if strings.HasPrefix(tc.file, ".github/") {
				calls, _ := os.ReadFile(ghLog)
				if strings.Count(string(calls), "workflow run flotilla-publish.yml --ref main\n") != 2 {
					t.Errorf("the job started the slice publisher %q, want after each of its 2 pushes", calls)
				}
			}

			// The schedule, with nothing to release: one look, no commit.
			out, took, err := job("schedule")
			if err != nil || !strings.Contains(out, "web: complete") {
				t.Errorf("scheduled run with nothing to do: %v after %s\n%s", err, took, out)
			}
			runIn(t, watch, env, "git", "pull", "-q", "--ff-only")
			if n := gitIn(t, filepath.Join(watch, ".git"), "rev-list", "--count", "HEAD"); n != "3" {
				t.Errorf("the scheduled run committed: %s commits on main", n)
			}
		})
	}
	gl, err := os.ReadFile(filepath.Join(templateDir, ".gitlab-ci.yml"))
	if err != nil || !strings.Contains(string(gl), "local: .gitlab/flotilla-rollout.yml") {
		t.Errorf(".gitlab-ci.yml does not include the rollout job: %v", err)
	}
}

// checkRolloutTriggers: the rollout job starts on a push to main that
// changes rendered/ (a merge that changes a slice or starts a rollout, an abort, a
// merged advance pull request) but not on its own pushes, keeps the
// schedule as the fallback, and runs one at a time, never cancelled.
func checkRolloutTriggers(t *testing.T, file string, doc map[string]any) {
	t.Helper()
	if strings.HasPrefix(file, ".github/") {
		on, _ := doc["on"].(map[string]any)
		push, _ := on["push"].(map[string]any)
		if fmt.Sprint(push["branches"]) != "[main]" || fmt.Sprint(push["paths"]) != "[rendered/**]" {
			t.Errorf("%s: on.push %v, want main, paths rendered/**", file, push)
		}
		if _, ok := on["schedule"]; !ok {
			t.Errorf("%s: no schedule", file)
		}
		conc, _ := doc["concurrency"].(map[string]any)
		if conc["group"] == nil || conc["cancel-in-progress"] != false {
			t.Errorf("%s: concurrency %v, want a group that is not cancelled in progress", file, conc)
		}
		perms, _ := doc["permissions"].(map[string]any)
		if perms["contents"] != "write" || perms["actions"] != "write" {
			t.Errorf("%s: permissions %v, want contents and actions write", file, perms)
		}
		return
	}
	job, _ := doc["flotilla-rollout"].(map[string]any)
	if job["resource_group"] == nil {
		t.Errorf("%s: no resource_group", file)
	}
	var rules []string
	rs, _ := job["rules"].([]any)
	for _, r := range rs {
		m, _ := r.(map[string]any)
		rule := fmt.Sprint(m["if"])
		if m["changes"] != nil {
			rule += " changes " + fmt.Sprint(m["changes"])
		}
		if m["when"] != nil {
			rule += " when " + fmt.Sprint(m["when"])
		}
		rules = append(rules, rule)
	}
	want := []string{
		`$CI_PIPELINE_SOURCE == "push" && $CI_COMMIT_AUTHOR =~ /^flotilla-rollout </ when never`,
		`$CI_PIPELINE_SOURCE == "push" && $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH changes [rendered/**/*]`,
		`$CI_PIPELINE_SOURCE == "schedule" && $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH`,
		`$CI_PIPELINE_SOURCE == "web" && $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH`,
	}
	if !slices.Equal(rules, want) {
		t.Errorf("%s: rules\n%s\nwant (the job's own pushes skipped first)\n%s", file, strings.Join(rules, "\n"), strings.Join(want, "\n"))
	}
}

// TestStatusRolloutCarriesWaves: flotilla status rollout -o json and -o
// yaml carry the waves the table shows, as rollout status gives them.
func TestStatusRolloutCarriesWaves(t *testing.T) {
	dir := rolloutWorkTree(t, "10m")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "web v2"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	table, stderr, code := runCLI(t, "status", "rollout", "--repo", dir)
	if code != ExitOK || !regexp.MustCompile(`(?m)^canary\s+a1\s+Pending\b.*no status reported`).MatchString(table) ||
		!regexp.MustCompile(`(?m)^rest\s+d4\s+Held\b`).MatchString(table) {
		t.Fatalf("table: exit %d\n%s%s", code, table, stderr)
	}
	stdout, stderr, code := runCLI(t, "status", "rollout", "--repo", dir, "-o", "json")
	var v fleetview.RolloutView
	if err := json.Unmarshal([]byte(stdout), &v); code != ExitOK || err != nil {
		t.Fatalf("json: exit %d %v\n%s%s", code, err, stdout, stderr)
	}
	if len(v.Waves) != 1 || v.Waves[0].Application != "web" || len(v.Waves[0].Waves) != 3 {
		t.Fatalf("json waves: %+v", v.Waves)
	}
	p := v.Waves[0]
	var rows []string
	for _, w := range p.Waves {
		for _, c := range w.Clusters {
			rows = append(rows, w.Name+" "+c.Cluster+" "+string(c.Phase))
			if !strings.Contains(table, c.Reason) {
				t.Errorf("the table has no %q", c.Reason)
			}
		}
	}
	if got := strings.Join(rows, ", "); got != "canary a1 Pending, wave-2 b2 Held, wave-2 c3 Held, rest d4 Held" ||
		p.Released != 1 || p.Bake.Duration != 10*time.Minute || !strings.Contains(table, "next: "+p.Blocked) {
		t.Errorf("json waves %s, released %d, bake %s, blocked %q; table:\n%s", got, p.Released, p.Bake.Duration, p.Blocked, table)
	}
	stdout, _, code = runCLI(t, "status", "rollout", "--repo", dir, "-o", "yaml")
	if code != ExitOK || !strings.Contains(stdout, "\nwaves:\n") || !strings.Contains(stdout, "application: web") {
		t.Errorf("yaml: exit %d\n%s", code, stdout)
	}
}
