package fleetview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/golden"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
	"github.com/flotilla-gitops/flotilla/test/testkeys"
)

// fixture is a fleet repo with three commits on main and status refs that
// show every state.
type fixture struct {
	srv        *gitserver.Server
	url, bare  string
	c1, c2, c3 string // main's commits
	now        time.Time
}

var fixtureClusters = []string{"member1", "member2", "member3", "member4", "member5", "member6", "edge-1", "edge-2"}

func clusterYAML(name, env, typ, key string) string {
	s := fmt.Sprintf("apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: %s\n  labels:\n    env: %s\n    type: %s\n", name, env, typ)
	if key != "" {
		s += "spec:\n  statusKeys:\n    - " + key + "\n"
	}
	return s
}

func fleetYAML(name, selector, interval string, threshold int) string {
	return fmt.Sprintf("apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: %s\nspec:\n  selector:\n    matchLabels:\n      %s\n  healthCheck:\n    interval: %s\n    failureThreshold: %d\n", name, selector, interval, threshold)
}

func sliceYAML(cluster, version string) string {
	return fmt.Sprintf("apiVersion: flotilla.dev/v1alpha1\nkind: Slice\ncluster: %s\nunits:\n- name: web\n  kind: manifests\n  path: %s/web\n  prune: true\n  wait: true\n  timeout: 5m0s\n  hash: sha256:%s\n", cluster, slice.ClusterDir(cluster), version)
}

// newFixture builds the fixture with fixed times, so every hash is the
// same on every run.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	srv := gitserver.Start(t, gitserver.ForgeConfig(append(fixtureClusters, "ghost")...))
	url, err := srv.CreateRepo("fleet", "")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: srv, url: url, bare: srv.RepoPath("fleet"), now: t0.Add(time.Minute)}
	maint := gitrepo.Auth{Username: gitserver.Maintainer, Password: srv.Password(gitserver.Maintainer)}
	author := func(d time.Duration) gitrepo.Signature {
		return gitrepo.Signature{Name: "Alice", Email: "alice@example.com", When: t0.Add(d)}
	}
	pub3 := testkeys.SSHSeeded(t, 3, "").Line()
	pub5 := testkeys.SSHSeeded(t, 5, "").Line()

	files := map[string][]byte{
		"fleets/production.yaml": []byte(fleetYAML("production", "env: production", "30s", 3)),
		"fleets/staging.yaml":    []byte(fleetYAML("staging", "env: staging", "30s", 4)),
		"fleets/edge.yaml":       []byte(fleetYAML("edge", "type: edge", "2m", 5)),
		"clusters/member1.yaml":  []byte(clusterYAML("member1", "production", "cloud", "")),
		"clusters/member2.yaml":  []byte(clusterYAML("member2", "staging", "cloud", "")),
		"clusters/member3.yaml":  []byte(clusterYAML("member3", "staging", "cloud", pub3)),
		"clusters/member4.yaml":  []byte(clusterYAML("member4", "production", "cloud", "")),
		"clusters/member5.yaml":  []byte(clusterYAML("member5", "staging", "cloud", pub5)),
		"clusters/member6.yaml":  []byte(clusterYAML("member6", "staging", "cloud", "")),
		"clusters/edge-1.yaml":   []byte(clusterYAML("edge-1", "production", "edge", "")),
		"clusters/edge-2.yaml":   []byte(clusterYAML("edge-2", "dev", "edge", "")),
	}
	for _, c := range fixtureClusters {
		files[slice.SlicePath(c)] = []byte(sliceYAML(c, "v1"))
	}
	push := func(ref string, files map[string][]byte, msg string, who gitrepo.Signature, auth gitrepo.Auth) string {
		t.Helper()
		res, err := gitrepo.PushFiles(ctx, url, ref, files, msg, who, gitrepo.PushOptions{Auth: auth})
		if err != nil {
			t.Fatalf("push %s: %v", ref, err)
		}
		return res.Hash
	}
	f.c1 = push("refs/heads/main", files, "Initial fleet", author(-3*time.Hour), maint)
	f.c2 = push("refs/heads/main", map[string][]byte{
		slice.SlicePath("member1"): []byte(sliceYAML("member1", "v2")),
		slice.SlicePath("member2"): []byte(sliceYAML("member2", "v2")),
		slice.SlicePath("member3"): []byte(sliceYAML("member3", "v2")),
		slice.SlicePath("edge-1"):  []byte(sliceYAML("edge-1", "v2")),
	}, "Roll out web v2\n\nTo the production and staging clusters.", author(-2*time.Hour), maint)
	f.c3 = push("refs/heads/main", map[string][]byte{"README.md": []byte("A fleet.\n")}, "Add a README", author(-time.Hour), maint)
	r1, r2 := "main@sha1:"+f.c1, "main@sha1:"+f.c2

	publish := func(doc *status.ClusterStatus, at time.Time, signer signature.Signer) {
		t.Helper()
		w, err := statuswriter.NewWriter(statuswriter.WriterOptions{Cluster: doc.Cluster, URL: url, Auth: statusdoc.AgentAuth(srv, doc.Cluster),
			HeartbeatInterval: 30 * time.Second, Signer: signer, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Publish(ctx, doc); err != nil {
			t.Fatalf("publish %s: %v", doc.Cluster, err)
		}
	}
	// member1: applied c2 (c3 did not touch its slice): in sync; two jobs.
	m1 := statusdoc.Ready("member1", r2)
	m1.Units[0].Hash = "sha256:v2"
	m1.KubernetesVersion = "v1.36.3"
	start := metav1.NewTime(t0.Add(-30 * time.Minute))
	m1.Jobs = []status.JobStatus{
		{Name: "train", Namespace: "ml", Unit: "job-train", Phase: "Running", Running: 4, StartTime: &start},
		{Name: "etl", Namespace: "ml", Unit: "job-etl", Phase: "Completed", Succeeded: 1, StartTime: &start},
	}
	publish(m1, t0, nil)
	// member2: fetched c2, its web unit fails to apply.
	m2 := statusdoc.Ready("member2", r1)
	m2.DesiredRevision, m2.FetchedRevision = r2, r2
	statusdoc.FailUnit(m2, "web", status.ReasonApplyFailed, `Deployment/web/web dry-run: apply failed: Deployment.apps "web" is invalid: spec.template.spec.containers[0].image: Required value`)
	m2.AppliedRevision = r1
	publish(m2, t0.Add(-10*time.Second), nil)
	// member3: fetched c2, still waiting for web's health; signed.
	m3 := statusdoc.Ready("member3", r1)
	m3.DesiredRevision, m3.FetchedRevision = r2, r2
	m3.Units[0].Hash = "sha256:v2"
	m3.Units[0].Conditions = []metav1.Condition{
		{Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: status.ReasonHealthCheckFailed, Message: "not ready: Deployment/web/web", LastTransitionTime: metav1.NewTime(t0)},
		{Type: status.ConditionReconciling, Status: metav1.ConditionTrue, Reason: status.ReasonProgressing, Message: "not ready: Deployment/web/web", LastTransitionTime: metav1.NewTime(t0)},
	}
	signer3 := testkeys.SSHSeeded(t, 3, "").Signer
	publish(m3, t0, signer3)
	// member4: healthy, but then someone rewrote its ref with another file.
	publish(statusdoc.Ready("member4", r1), t0, nil)
	forged, err := status.Encode(statusdoc.Ready("member4", r1))
	if err != nil {
		t.Fatal(err)
	}
	push(status.RefFor("member4"), map[string][]byte{status.FileName: forged, "evil.yaml": []byte("x: 1\n")}, "fix status", gitrepo.Signature{Name: "mallory", When: t0}, maint)
	// member5: requires signatures, its agent does not sign.
	publish(statusdoc.Ready("member5", r1), t0, nil)
	// member6: its agent claims to be member1.
	claim, err := status.Encode(statusdoc.Ready("member1", r2))
	if err != nil {
		t.Fatal(err)
	}
	push(status.RefFor("member6"), map[string][]byte{status.FileName: claim}, "status", gitrepo.Signature{Name: "member6", When: t0}, statusdoc.AgentAuth(srv, "member6"))
	// edge-1: last heard of 15 minutes ago (threshold 2m × 5).
	publish(statusdoc.Ready("edge-1", r1), t0.Add(-15*time.Minute), nil)
	// edge-2: never reported. ghost: no such cluster.
	push(status.RefFor("ghost"), map[string][]byte{status.FileName: claim}, "boo", gitrepo.Signature{Name: "ghost", When: t0}, statusdoc.AgentAuth(srv, "ghost"))
	return f
}

func (f *fixture) maintainer() gitrepo.Auth {
	return gitrepo.Auth{Username: gitserver.Maintainer, Password: f.srv.Password(gitserver.Maintainer)}
}

func (f *fixture) options() ReadOptions {
	return ReadOptions{Repo: f.bare, Now: func() time.Time { return f.now }}
}

// normalizeRepo replaces the fixture's temporary paths and ports.
func normalizeRepo(v *View) {
	v.Repo = "fleet.git"
	for i := range v.Strays {
		v.Strays[i].Repo = "fleet.git"
	}
}

// TestReader shares one fixture between its subtests: building it takes
// some twenty pushes.
func TestReader(t *testing.T) {
	f := newFixture(t)
	t.Run("fleet", func(t *testing.T) { testReadFleetGolden(t, f) })
	t.Run("rollout", func(t *testing.T) { testReadRolloutGolden(t, f) })
	t.Run("filter", func(t *testing.T) { testReadFiltersClusters(t, f) })
	t.Run("signer", func(t *testing.T) { testReadChecksSigner(t, f) }) // last: it rewrites member5's ref
}

// testReadChecksSigner: member5 lists statusKeys; a commit signed by
// another key is not believed, one signed by its key is.
func testReadChecksSigner(t *testing.T, f *fixture) {
	ctx := context.Background()
	o := f.options()
	o.Clusters = []string{"member5"}
	for _, tt := range []struct {
		seed  byte
		units []string // differ per step, so each step is a new commit
		want  State
	}{
		{9, []string{"web", "api"}, StateUntrusted},
		{5, []string{"web", "db"}, StateInSync},
	} {
		signer := testkeys.SSHSeeded(t, tt.seed, "").Signer
		w, err := statuswriter.NewWriter(statuswriter.WriterOptions{Cluster: "member5", URL: f.url, Auth: statusdoc.AgentAuth(f.srv, "member5"), Signer: signer,
			Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Publish(ctx, statusdoc.Ready("member5", "main@sha1:"+f.c1, tt.units...)); err != nil {
			t.Fatal(err)
		}
		v, err := Read(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		c := v.Clusters[0]
		if c.State != tt.want {
			t.Errorf("signed by key %d: %s (%s), want %s", tt.seed, c.State, c.Reason, tt.want)
		}
		if tt.want == StateUntrusted && (!strings.Contains(c.Reason, "not among cluster member5's statusKeys") || c.UnitsTotal != 0) {
			t.Errorf("signed by another key: %+v", c)
		}
		if tt.want == StateInSync && (c.Trust == nil || !strings.HasPrefix(c.Trust.Signer, "ssh ") || c.UnitsTotal != 2) {
			t.Errorf("signed by its key: %+v", c)
		}
	}
}

func testReadFleetGolden(t *testing.T, f *fixture) {
	ctx := context.Background()
	v, err := Read(ctx, f.options())
	if err != nil {
		t.Fatal(err)
	}
	normalizeRepo(v)

	want := map[string]State{
		"member1": StateInSync, "member2": StateFailing, "member3": StateBehind, "member4": StateUntrusted,
		"member5": StateUntrusted, "member6": StateUntrusted, "edge-1": StateUnreachable, "edge-2": StateNoStatus,
	}
	for _, c := range v.Clusters {
		if c.State != want[c.Name] {
			t.Errorf("%s: %s (%s), want %s", c.Name, c.State, c.Reason, want[c.Name])
		}
	}
	// What `flotilla status --exit-code` fails on: Failing, Unreachable,
	// Untrusted; not Behind, NoStatus or InSync.
	var unhealthy []string
	for _, c := range v.Unhealthy() {
		unhealthy = append(unhealthy, c.Name)
	}
	if want := []string{"edge-1", "member2", "member4", "member5", "member6"}; !slices.Equal(unhealthy, want) {
		t.Errorf("unhealthy: %v, want %v", unhealthy, want)
	}
	byName := map[string]ClusterView{}
	for _, c := range v.Clusters {
		byName[c.Name] = c
	}
	if c := byName["member2"]; len(c.FailingUnits) != 1 || !strings.Contains(c.FailingUnits[0].Message, "Required value") {
		t.Errorf("member2's failure: %+v", c.FailingUnits)
	}
	if c := byName["member3"]; c.Trust == nil || !strings.HasPrefix(c.Trust.Signer, "ssh ") {
		t.Errorf("member3's signature: %+v", c.Trust)
	}
	if c := byName["member6"]; !strings.Contains(c.Reason, `claims to be cluster "member1"`) || c.UnitsTotal != 0 {
		t.Errorf("member6's forged claim was believed: %+v", c)
	}
	if c := byName["member1"]; c.Jobs.Total != 2 || c.Jobs.ByPhase["Running"] != 1 {
		t.Errorf("member1's jobs: %+v", c.Jobs)
	}
	if len(v.Strays) != 1 || !strings.HasSuffix(v.Strays[0].Ref, "/ghost") {
		t.Errorf("strays: %+v", v.Strays)
	}

	for _, format := range Formats {
		var b bytes.Buffer
		if err := WriteFleet(&b, v, format); err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, filepath.Join("testdata", "golden", "fleet."+format), b.Bytes())
	}

	// The same view from the URL (fetched into a cache) as from the
	// directory.
	o := f.options()
	o.Repo, o.CacheDir, o.Auth = f.url, t.TempDir(), f.maintainer()
	for i := 0; i < 2; i++ { // the second read uses the cache
		remote, err := Read(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		normalizeRepo(remote)
		a, _ := json.Marshal(v)
		b, _ := json.Marshal(remote)
		if !bytes.Equal(a, b) {
			t.Errorf("read %d from the URL differs from the directory:\n%s\n%s", i, b, a)
		}
	}
}

func testReadRolloutGolden(t *testing.T, f *fixture) {
	ctx := context.Background()
	r, err := ReadRollout(ctx, f.options(), f.c2[:10])
	if err != nil {
		t.Fatal(err)
	}
	r.Repo = "fleet.git"
	want := map[string]RolloutState{
		"member1": RolloutCompleted, "member2": RolloutFailed, "member3": RolloutPropagating, "edge-1": RolloutDispatched,
		"member4": RolloutUnaffected, "member5": RolloutUnaffected, "member6": RolloutUnaffected, "edge-2": RolloutUnaffected,
	}
	for _, c := range r.Clusters {
		if c.State != want[c.Name] {
			t.Errorf("%s: %s (%s), want %s", c.Name, c.State, c.Reason, want[c.Name])
		}
	}
	if r.State != RolloutFailed || r.Behind != 1 || r.Commit != f.c2 || r.Subject != "Roll out web v2" {
		t.Errorf("rollout: %s, %d behind, %s %q", r.State, r.Behind, r.Commit, r.Subject)
	}
	for _, format := range Formats {
		var b bytes.Buffer
		if err := WriteRollout(&b, r, format); err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, filepath.Join("testdata", "golden", "rollout."+format), b.Bytes())
	}

	// Idempotent: the same answer again.
	again, err := ReadRollout(ctx, f.options(), f.c2)
	if err != nil {
		t.Fatal(err)
	}
	again.Repo = r.Repo
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(again)
	if !bytes.Equal(a, b) {
		t.Error("a second rollout read differs")
	}

	// The head commit touched no slice; the first created every one.
	head, err := ReadRollout(ctx, f.options(), "")
	if err != nil {
		t.Fatal(err)
	}
	if head.Commit != f.c3 || head.Summary[RolloutUnaffected] != len(fixtureClusters) || head.State != RolloutCompleted {
		t.Errorf("rollout of the head: %+v", head.Summary)
	}
	// While no dispatched cluster failed and some are not done, the change
	// as a whole is Accepted.
	o := f.options()
	o.Clusters = []string{"member3", "edge-1", "member1"}
	unfinished, err := ReadRollout(ctx, o, f.c2)
	if err != nil {
		t.Fatal(err)
	}
	if unfinished.State != RolloutAccepted || unfinished.Summary[RolloutPropagating] != 1 || unfinished.Summary[RolloutDispatched] != 1 || unfinished.Summary[RolloutCompleted] != 1 {
		t.Errorf("rollout without the failing cluster: %s %v, want Accepted with one Propagating, Dispatched and Completed", unfinished.State, unfinished.Summary)
	}
	first, err := ReadRollout(ctx, f.options(), f.c1)
	if err != nil {
		t.Fatal(err)
	}
	if first.Summary[RolloutUnaffected] != 0 {
		t.Errorf("rollout of the root commit: %+v", first.Summary)
	}

	// From the URL, a full hash works and a commit off main is refused.
	o = f.options()
	o.Repo, o.CacheDir, o.Auth = f.url, t.TempDir(), f.maintainer()
	remote, err := ReadRollout(ctx, o, f.c2)
	if err != nil {
		t.Fatal(err)
	}
	remote.Repo = r.Repo
	c, _ := json.Marshal(remote)
	if !bytes.Equal(a, c) {
		t.Errorf("rollout from the URL differs:\n%s\n%s", c, a)
	}
	side, err := gitrepo.PushFiles(ctx, f.url, "refs/heads/feature", map[string][]byte{"x": []byte("y")}, "side", gitrepo.Signature{Name: "a", When: t0},
		gitrepo.PushOptions{Auth: gitrepo.Auth{Username: gitserver.Maintainer, Password: f.srv.Password(gitserver.Maintainer)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRollout(ctx, f.options(), side.Hash); !errors.Is(err, ErrNotMerged) {
		t.Errorf("rollout of a commit not on main: %v", err)
	}
}

func testReadFiltersClusters(t *testing.T, f *fixture) {
	o := f.options()
	o.Clusters = []string{"member2", "edge-2"}
	v, err := Read(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Clusters) != 2 || v.Clusters[0].Name != "edge-2" || v.Clusters[1].Name != "member2" {
		t.Errorf("filtered view: %+v", v.Clusters)
	}
	o.Clusters = []string{"nope"}
	if _, err := Read(context.Background(), o); err == nil {
		t.Error("an unknown cluster was accepted")
	}
}
