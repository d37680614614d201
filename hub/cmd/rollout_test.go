package cmd

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/compile"
	"github.com/flotilla-gitops/flotilla/pkg/fleetstatus"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
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
	w, err := status.NewWriter(status.WriterOptions{
		Cluster: cluster, URL: p.url, HeartbeatInterval: 30 * time.Second,
		Auth: gitrepo.Auth{Username: gitserver.AgentUser(cluster), Password: p.srv.Password(gitserver.AgentUser(cluster))},
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
	st, err := compile.CommittedAt(dir).State("web")
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

// TestTemplateRolloutCI runs the flotilla commands of the template's
// scheduled rollout jobs, as written there, in a clone of a fleet repo with
// a rollout nobody reported on: advance exits 1 (nothing to do, which the
// scripts do not treat as a failure) and says why.
func TestTemplateRolloutCI(t *testing.T) {
	dir := rolloutWorkTree(t, "1m")
	planGit(t, dir, "init", "-q", "-b", "main")
	planGit(t, dir, "add", "-A")
	planGit(t, dir, "commit", "-q", "-m", "fleet")
	for _, file := range []string{".github/workflows/flotilla-rollout.yml", ".gitlab/flotilla-rollout.yml"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(templateDir, file))
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			lines := ciCommandLines(doc)
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "flotilla rollout advance") {
				t.Fatalf("%s runs %q, want flotilla rollout advance", file, lines)
			}
			args := ciArgs(t, lines[0], nil)
			t.Chdir(dir)
			stdout, stderr, code := runCLI(t, args[1:]...)
			if code != ExitChanges || !strings.Contains(stdout, "web: wave canary is not Ready: a1 Pending") {
				t.Fatalf("%s: exit %d\n%s%s", lines[0], code, stdout, stderr)
			}
		})
	}
	gl, err := os.ReadFile(filepath.Join(templateDir, ".gitlab-ci.yml"))
	if err != nil || !strings.Contains(string(gl), "local: .gitlab/flotilla-rollout.yml") {
		t.Errorf(".gitlab-ci.yml does not include the rollout job: %v", err)
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
	var v fleetstatus.RolloutView
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
