package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
)

// TestStatusCommand runs `flotilla status` and `status rollout` on the
// template fleet repo with one agent's status committed by the real writer.
func TestStatusCommand(t *testing.T) {
	srv := gitserver.Start(t, gitserver.ForgeConfig("member1", "member2", "edge-1"))
	url := srv.MustCreateRepo(t, "fleet", templateDir)
	bare := srv.RepoPath("fleet")
	head := srv.Head("fleet", "main")
	rev := "main@sha1:" + head

	w, err := statuswriter.NewWriter(statuswriter.WriterOptions{
		Cluster: "member1", URL: url, HeartbeatInterval: 30 * time.Second,
		Auth: statusdoc.AgentAuth(srv, "member1"),
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
	var v fleetview.View
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	states := map[string]fleetview.State{}
	for _, c := range v.Clusters {
		states[c.Name] = c.State
	}
	if states["member1"] != fleetview.StateInSync || states["member2"] != fleetview.StateNoStatus || states["edge-1"] != fleetview.StateNoStatus {
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

// TestStatusExitCode: with --exit-code, status exits 1 when a cluster is
// Failing or Unreachable (Untrusted: hub/fleetview' TestReader), naming
// them on stderr, and 0 while the others are only InSync or NoStatus; the
// view is printed either way.
func TestStatusExitCode(t *testing.T) {
	srv := gitserver.Start(t, gitserver.ForgeConfig("member1", "member2", "edge-1"))
	url := srv.MustCreateRepo(t, "fleet", templateDir)
	bare := srv.RepoPath("fleet")
	rev := "main@sha1:" + srv.Head("fleet", "main")
	publish := func(cluster string, now time.Time, doc *status.ClusterStatus) {
		t.Helper()
		w, err := statuswriter.NewWriter(statuswriter.WriterOptions{
			Cluster: cluster, URL: url, HeartbeatInterval: 30 * time.Second, Now: func() time.Time { return now },
			Auth: statusdoc.AgentAuth(srv, cluster),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Publish(context.Background(), doc); err != nil {
			t.Fatal(err)
		}
	}
	healthy := &status.ClusterStatus{Cluster: "member1", DesiredRevision: rev, AppliedRevision: rev,
		Units: []status.UnitStatus{{Name: "web", AppliedRevision: rev, Conditions: []metav1.Condition{readyCondition()}}}}
	publish("member1", time.Now(), healthy)

	stdout, stderr, code := runCLI(t, "status", "--repo", bare, "--exit-code")
	if code != ExitOK || !strings.Contains(stdout, "InSync") || stderr != "" {
		t.Errorf("member1 InSync, the others NoStatus: exit %d, want 0\n%s%s", code, stdout, stderr)
	}

	publish("member2", time.Now(), &status.ClusterStatus{Cluster: "member2", DesiredRevision: rev, LastError: "fetch: connection refused"})
	edge := *healthy
	edge.Cluster = "edge-1"
	publish("edge-1", time.Now().Add(-2*time.Hour), &edge)

	stdout, stderr, code = runCLI(t, "status", "--repo", bare, "--exit-code", "-o", "json")
	if code != ExitUnhealthy {
		t.Errorf("exit %d, want %d\n%s", code, ExitUnhealthy, stderr)
	}
	for _, want := range []string{"unhealthy: member2 Failing\n", "unhealthy: edge-1 Unreachable\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "member1") {
		t.Errorf("stderr names the healthy member1:\n%s", stderr)
	}
	var v fleetview.View
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || len(v.Clusters) != 3 {
		t.Errorf("the view is still printed, as one JSON document: %v\n%s", err, stdout)
	}

	// Without the flag the same fleet exits 0, as before.
	if _, stderr, code := runCLI(t, "status", "--repo", bare); code != ExitOK {
		t.Errorf("without --exit-code: exit %d\n%s", code, stderr)
	}
	// An error is still 2, not 1.
	if _, stderr, code := runCLI(t, "status", "--repo", filepath.Join(t.TempDir(), "nothing"), "--exit-code"); code != ExitError {
		t.Errorf("a missing repo: exit %d, want %d\n%s", code, ExitError, stderr)
	}
	if _, stderr, code := runCLI(t, "status", "--repo", bare, "--exit-code", "--watch"); code != ExitError || !strings.Contains(stderr, "exit-code") {
		t.Errorf("--exit-code with --watch: exit %d, want %d\n%s", code, ExitError, stderr)
	}
}

func readyCondition() metav1.Condition {
	return metav1.Condition{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSucceeded, LastTransitionTime: metav1.Now()}
}

// TestStatusShardedRepos: agents commit to status repos chosen by
// --status-repo-url's {shard} (status.ShardURL); `flotilla status
// --status-repo …{shard}… --status-shards 2` reads every shard, from URLs
// and from local directories, and shows each cluster's status.
func TestStatusShardedRepos(t *testing.T) {
	clusters := []string{"member1", "member2", "edge-1"}
	const shards = 2
	srv := gitserver.Start(t, gitserver.ForgeConfig(clusters...))
	srv.MustCreateRepo(t, "fleet", templateDir)
	bare := srv.RepoPath("fleet")
	rev := "main@sha1:" + srv.Head("fleet", "main")
	for i := 0; i < shards; i++ {
		srv.MustCreateRepo(t, "status-"+strconv.Itoa(i), "")
	}
	urlTemplate := srv.URL("status-" + status.ShardPlaceholder)
	used := map[int]bool{}
	for _, c := range clusters {
		url, err := status.ShardURL(urlTemplate, c, shards)
		if err != nil {
			t.Fatal(err)
		}
		used[status.Shard(c, shards)] = true
		w, err := statuswriter.NewWriter(statuswriter.WriterOptions{Cluster: c, URL: url,
			Auth: statusdoc.AgentAuth(srv, c)})
		if err != nil {
			t.Fatal(err)
		}
		doc := &status.ClusterStatus{Cluster: c, DesiredRevision: rev, AppliedRevision: rev,
			Units: []status.UnitStatus{{Name: "web", AppliedRevision: rev, Conditions: []metav1.Condition{readyCondition()}}}}
		if err := w.Publish(context.Background(), doc); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	if len(used) != shards {
		t.Fatalf("the clusters use shards %v; the test needs every one of %d", used, shards)
	}
	// Each status ref is in its shard's repo and nowhere else.
	for i := 0; i < shards; i++ {
		refs, err := srv.Refs("status-" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range clusters {
			_, ok := refs[status.RefFor(c)]
			if want := status.Shard(c, shards) == i; ok != want {
				t.Errorf("shard %d holds %s's status: %v, want %v", i, c, ok, want)
			}
		}
	}
	if refs, _ := srv.Refs("fleet"); len(refs) != 1 {
		t.Errorf("status reached the fleet repo: %v", refs)
	}

	creds := t.TempDir()
	for name, v := range map[string]string{gitrepo.SecretUsername: gitserver.Maintainer, gitrepo.SecretPassword: srv.Password(gitserver.Maintainer)} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, args := range map[string][]string{
		"urls":        {"--status-repo", urlTemplate, "--git-credentials-dir", creds, "--cache-dir", t.TempDir()},
		"directories": {"--status-repo", srv.RepoPath("status-" + status.ShardPlaceholder)},
	} {
		stdout, stderr, code := runCLI(t, append([]string{"status", "--repo", bare, "--status-shards", "2", "-o", "yaml"}, args...)...)
		if code != ExitOK {
			t.Fatalf("%s: exit %d\n%s", name, code, stderr)
		}
		var v fleetview.View
		if err := yaml.Unmarshal([]byte(stdout), &v); err != nil {
			t.Fatalf("%s: -o yaml: %v\n%s", name, err, stdout)
		}
		if v.Summary[fleetview.StateInSync] != len(clusters) || len(v.Clusters) != len(clusters) {
			t.Errorf("%s: summary %v, want %d InSync\n%s", name, v.Summary, len(clusters), stdout)
		}
	}
	// Without the status repos the fleet repo has no status at all.
	stdout, _, _ := runCLI(t, "status", "--repo", bare, "-o", "json")
	var v fleetview.View
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || v.Summary[fleetview.StateNoStatus] != len(clusters) {
		t.Errorf("status without --status-repo: %v %v", v.Summary, err)
	}
}

// TestStatusWatch: --watch prints the view again every --interval until
// the context ends, and then exits cleanly. The context ends once a third
// view has begun, so the test waits for views, not for a clock: a slow
// machine only makes it slower.
func TestStatusWatch(t *testing.T) {
	srv := gitserver.Start(t, gitserver.ForgeConfig())
	srv.MustCreateRepo(t, "fleet", templateDir)
	root := NewRootCommand()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout := &viewCounter{views: 3, reached: cancel}
	var stderr bytes.Buffer
	root.SetOut(stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"status", "--repo", srv.RepoPath("fleet"), "--watch", "--interval", "300ms"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("status --watch: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("no third view in 2m at a 300ms interval:\n%s", out)
	}
	// The third view may be cut short by the end of the context; the
	// first two are whole.
	views := strings.Split(out, "\n--- ")
	if len(views) < 4 || views[0] != "" {
		t.Fatalf("want a header before each of at least 3 views:\n%s", out)
	}
	for i, v := range views[1:3] {
		if !strings.Contains(v, "CLUSTER") || !strings.Contains(v, "member1 ") {
			t.Errorf("view %d is not a full table:\n%s", i+1, v)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
}

// viewCounter is --watch's stdout: it calls reached once the output holds
// views view headers.
type viewCounter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	views   int
	reached func()
}

func (w *viewCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Count(w.buf.String(), "\n--- ") >= w.views && w.reached != nil {
		w.reached()
		w.reached = nil
	}
	return n, err
}

func (w *viewCounter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestStatusClockSkewTolerance: --clock-skew-tolerance reaches the reader.
// An agent whose clock runs an hour ahead shows ClockSkew by default (2m)
// and its real state with a tolerance of a few hours.
func TestStatusClockSkewTolerance(t *testing.T) {
	srv := gitserver.Start(t, gitserver.ForgeConfig("member1", "member2", "edge-1"))
	url := srv.MustCreateRepo(t, "fleet", templateDir)
	bare := srv.RepoPath("fleet")
	rev := "main@sha1:" + srv.Head("fleet", "main")

	w, err := statuswriter.NewWriter(statuswriter.WriterOptions{
		Cluster: "member1", URL: url, HeartbeatInterval: 30 * time.Second,
		Auth: statusdoc.AgentAuth(srv, "member1"),
		Now:  func() time.Time { return time.Now().Add(time.Hour) },
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

	member1 := func(args ...string) fleetview.ClusterView {
		t.Helper()
		stdout, stderr, code := runCLI(t, append([]string{"status", "--repo", bare, "--cluster", "member1", "-o", "json"}, args...)...)
		if code != ExitOK {
			t.Fatalf("status %v: exit %d\n%s", args, code, stderr)
		}
		var v fleetview.View
		if err := json.Unmarshal([]byte(stdout), &v); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		if len(v.Clusters) != 1 {
			t.Fatalf("status %v: %d clusters, want member1 only\n%s", args, len(v.Clusters), stdout)
		}
		return v.Clusters[0]
	}
	if c := member1(); c.State != fleetview.StateClockSkew || c.ClockSkew == nil {
		t.Errorf("default tolerance: state %s, clock skew %v; want ClockSkew with the offset", c.State, c.ClockSkew)
	}
	if c := member1("--clock-skew-tolerance", "3h"); c.State != fleetview.StateInSync || c.ClockSkew != nil {
		t.Errorf("--clock-skew-tolerance 3h: state %s, clock skew %v; want InSync", c.State, c.ClockSkew)
	}
	// The table says so too, and a tolerance that is no tolerance is refused.
	stdout, stderr, code := runCLI(t, "status", "--repo", bare, "--cluster", "member1")
	if code != ExitOK || !strings.Contains(stdout, "ClockSkew") {
		t.Errorf("table with the default tolerance: exit %d\n%s%s", code, stdout, stderr)
	}
	_, stderr, code = runCLI(t, "status", "--repo", bare, "--clock-skew-tolerance", "0s")
	if code != ExitError || !strings.Contains(stderr, "--clock-skew-tolerance") {
		t.Errorf("a zero tolerance: exit %d, %s", code, stderr)
	}
}
