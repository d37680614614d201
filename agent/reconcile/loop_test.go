package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/agent/truststate"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// One minimal cluster (no controllers: Deployments never become Ready)
// serves the package's tests; each test has its own namespaces.
var shared = &testenv.Shared{Name: "reconcile", Options: testenv.ClusterOptions{Mode: testenv.Minimal}}

func TestMain(m *testing.M) {
	render.ServeWorkerIfRequested()
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	shared.Close(code)
	os.Exit(code)
}

func cluster(t *testing.T) *testenv.Cluster {
	t.Helper()
	return shared.Get(t)
}

// unit is a unit of a test slice: a kustomization over files.
type unit struct {
	name      string
	files     map[string]string
	dependsOn []string
	noPrune   bool
	wait      bool
	// allowEmpty lets the unit render no objects (and then prune all).
	allowEmpty bool
	suspend    bool
	// timeout of the health wait; 3s when zero.
	timeout time.Duration
}

// writeSlice writes the cluster's slice into dir, replacing the old one.
func writeSlice(t *testing.T, dir, clusterName string, units []unit) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(slice.ClusterDir(clusterName)))); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: %s\nkind: %s\ncluster: %s\nunits:\n", slice.APIVersion, slice.Kind, clusterName)
	for _, u := range units {
		unitDir := slice.UnitDir(clusterName, u.name)
		var files []slice.File
		names := make([]string, 0, len(u.files))
		for n := range u.files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := filepath.Join(dir, filepath.FromSlash(unitDir), n)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(u.files[n]), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, slice.File{Name: n, Data: []byte(u.files[n])})
		}
		timeout := u.timeout
		if timeout == 0 {
			timeout = 3 * time.Second
		}
		fmt.Fprintf(&b, "- name: %s\n  kind: kustomize\n  path: %s\n  prune: %v\n  wait: %v\n  timeout: %s\n  hash: %s\n",
			u.name, unitDir, !u.noPrune, u.wait, timeout, slice.UnitHash(files, ""))
		if len(u.dependsOn) > 0 {
			fmt.Fprintf(&b, "  dependsOn: [%s]\n", strings.Join(u.dependsOn, ", "))
		}
		if u.allowEmpty {
			b.WriteString("  allowEmpty: true\n")
		}
		if u.suspend {
			b.WriteString("  suspend: true\n")
		}
	}
	p := filepath.Join(dir, filepath.FromSlash(slice.SlicePath(clusterName)))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func configMapUnit(name, ns, value string) unit {
	return unit{name: name, files: map[string]string{
		"kustomization.yaml": "resources:\n  - cm.yaml\n",
		"cm.yaml":            fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  value: %q\n", name, ns, value),
	}}
}

// env is one test's Git repository, agent namespace and loop.
type env struct {
	t       *testing.T
	c       *testenv.Cluster
	k       client.Client
	srv     *gitserver.Server
	dir     string
	name    string // cluster, repository, namespace prefix
	ns      string // application namespace
	counter *apply.WriteCounter
	applier *apply.Applier
	loop    *reconcile.Loop
	url     string
	disc    reconcile.Discovery
}

func newEnv(t *testing.T, name string, units []unit, verifier reconcile.Verifier) *env {
	t.Helper()
	c := cluster(t)
	e := &env{t: t, c: c, k: c.Client(), srv: gitserver.Start(t, gitserver.ForgeConfig()), dir: t.TempDir(), name: name, ns: name + "-apps"}
	ctx := context.Background()
	for _, ns := range []string{e.ns, "flotilla-" + name} {
		if err := c.CreateNamespace(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	writeSlice(t, e.dir, name, units)
	url := e.srv.MustCreateRepo(t, name, e.dir)
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 200, 400
	e.counter = &apply.WriteCounter{}
	e.counter.Wrap(cfg)
	var err error
	e.applier, err = apply.New(cfg, apply.Options{InventoryNamespace: "flotilla-" + name, Cluster: name, PollInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	disc, err := reconcile.NewKubeDiscovery(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.url, e.disc = url, disc
	e.loop = e.newLoop(verifier, nil)
	return e
}

// newLoop is a loop as a new agent process has it: its own empty cache.
func (e *env) newLoop(verifier reconcile.Verifier, st reconcile.AcceptedStore) *reconcile.Loop {
	e.t.Helper()
	loop, err := reconcile.New(reconcile.Config{
		Cluster: e.name,
		Source: &gitrepo.Source{URL: e.url, Auth: gitrepo.Auth{Username: gitserver.Maintainer, Password: e.srv.Password(gitserver.Maintainer)},
			CacheDir: e.t.TempDir(), Timeout: 10 * time.Second},
		Applier: e.applier, Discovery: e.disc, Verifier: verifier, State: st,
		Interval: time.Second, Workers: 4,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return loop
}

// push commits the slice in e.dir.
func (e *env) push(units []unit) string {
	e.t.Helper()
	writeSlice(e.t, e.dir, e.name, units)
	files := map[string]string{}
	err := filepath.WalkDir(e.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(e.dir, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return e.srv.Commit(e.t, e.name, gitserver.Maintainer, files, []string{slice.RenderedDir}, "change")
}

func (e *env) cycle() (*status.ClusterStatus, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return e.loop.Cycle(ctx)
}

func (e *env) value(name string) (string, error) {
	cm := &corev1.ConfigMap{}
	err := e.k.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, cm)
	return cm.Data["value"], err
}

func unitStatus(st *status.ClusterStatus, name string) *status.UnitStatus {
	for i := range st.Units {
		if st.Units[i].Name == name {
			return &st.Units[i]
		}
	}
	return nil
}

func readyReason(u *status.UnitStatus) string {
	if u == nil {
		return "<no unit>"
	}
	c := apimeta.FindStatusCondition(u.Conditions, status.ConditionReady)
	if c == nil {
		return "<no Ready>"
	}
	return string(c.Status) + "/" + c.Reason
}

func TestLoopUnchangedUnitsAreNotRenderedOrWritten(t *testing.T) {
	e := newEnv(t, "unchanged", []unit{configMapUnit("a", "unchanged-apps", "1"), configMapUnit("b", "unchanged-apps", "1")}, nil)
	st, err := e.cycle()
	if err != nil || !strings.HasSuffix(st.AppliedRevision, e.srv.Head(e.name, "main")) {
		t.Fatalf("first cycle: %v %+v", err, st)
	}
	if st.KubernetesVersion == "" || len(st.APIVersions) == 0 {
		t.Errorf("discovery missing from status: %q %d", st.KubernetesVersion, len(st.APIVersions))
	}
	e.counter.Reset()
	st, err = e.cycle()
	if err != nil || readyReason(unitStatus(st, "a")) != "True/"+status.ReasonSucceeded {
		t.Fatalf("second cycle: %v %+v", err, st)
	}
	if w, d := e.counter.Writes(), e.counter.DryRuns(); w != 0 || d != 0 {
		t.Errorf("unchanged cycle: %d writes, %d dry-runs", w, d)
	}

	// Only the changed unit is applied.
	rev := e.push([]unit{configMapUnit("a", "unchanged-apps", "2"), configMapUnit("b", "unchanged-apps", "1")})
	e.counter.Reset()
	st, err = e.cycle()
	if err != nil || !strings.HasSuffix(st.AppliedRevision, rev) {
		t.Fatalf("third cycle: %v %+v", err, st)
	}
	if v, _ := e.value("a"); v != "2" {
		t.Errorf("a = %q", v)
	}
	if w := e.counter.Writes(); w != 2 {
		t.Errorf("%d writes for one changed ConfigMap, want 2 (object and inventory)", w)
	}
	// Unit b is at the new revision too: its content did not change.
	if b := unitStatus(st, "b"); b == nil || !strings.HasSuffix(b.AppliedRevision, rev) {
		t.Errorf("unit b: %+v", b)
	}
}

func TestLoopDependencyNotReady(t *testing.T) {
	ns := "deps-apps"
	deployment := unit{name: "slow", wait: true, files: map[string]string{
		"kustomization.yaml": "resources:\n  - d.yaml\n",
		// Nothing in a minimal cluster makes a Deployment Ready.
		"d.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: slow\n  namespace: " + ns + "\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: slow}\n  template:\n    metadata:\n      labels: {app: slow}\n    spec:\n      containers:\n        - name: c\n          image: nginx\n",
	}}
	dependent := configMapUnit("dependent", ns, "x")
	dependent.dependsOn = []string{"slow"}
	independent := configMapUnit("independent", ns, "x")
	e := newEnv(t, "deps", []unit{deployment, dependent, independent}, nil)
	st, err := e.cycle()
	if err != nil {
		t.Fatal(err)
	}
	if r := readyReason(unitStatus(st, "slow")); r != "False/"+status.ReasonHealthCheckFailed {
		t.Errorf("slow: %s", r)
	}
	if r := readyReason(unitStatus(st, "dependent")); r != "False/"+status.ReasonDependencyNotReady {
		t.Errorf("dependent: %s", r)
	}
	if r := readyReason(unitStatus(st, "independent")); r != "True/"+status.ReasonSucceeded {
		t.Errorf("independent: %s", r)
	}
	if _, err := e.value("dependent"); !apierrors.IsNotFound(err) {
		t.Errorf("the dependent was applied: %v", err)
	}
	if st.AppliedRevision != "" {
		t.Errorf("applied revision %q with a unit not applied", st.AppliedRevision)
	}
	c := apimeta.FindStatusCondition(st.Conditions, status.ConditionReconciling)
	if c == nil || c.Status != "True" {
		t.Errorf("cluster not Reconciling: %+v", st.Conditions)
	}
}

func TestLoopRefusedCommitKeepsTheLastAccepted(t *testing.T) {
	var mu sync.Mutex
	refused := map[string]bool{}
	verifier := reconcile.VerifierFunc(func(_ context.Context, head gitrepo.Result) (*status.Verification, error) {
		mu.Lock()
		defer mu.Unlock()
		if refused[head.Hash] {
			return &status.Verification{Mode: "test", Verified: false, Message: "untrusted"}, errors.New("signed by an untrusted key")
		}
		return &status.Verification{Mode: "test", Verified: true, Signer: "tester"}, nil
	})
	ns := "refuse-apps"
	e := newEnv(t, "refuse", []unit{configMapUnit("cfg", ns, "good")}, verifier)
	st, err := e.cycle()
	if err != nil || st.Verification == nil || !st.Verification.Verified {
		t.Fatalf("first cycle: %v %+v", err, st)
	}
	good := st.AppliedRevision

	bad := e.push([]unit{configMapUnit("cfg", ns, "evil")})
	mu.Lock()
	refused[bad] = true
	mu.Unlock()
	st, err = e.cycle()
	if err == nil || !strings.Contains(st.LastError, "untrusted") {
		t.Fatalf("refused commit: %v %+v", err, st)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, status.ConditionReady); c == nil || c.Reason != status.ReasonVerificationFailed {
		t.Errorf("Ready: %+v", c)
	}
	if st.AppliedRevision != good || !strings.HasSuffix(st.FetchedRevision, bad) {
		t.Errorf("revisions: applied %s fetched %s", st.AppliedRevision, st.FetchedRevision)
	}
	if v, _ := e.value("cfg"); v != "good" {
		t.Fatalf("refused content applied: %q", v)
	}
	// Drift is still corrected, from the last accepted revision.
	cm := &corev1.ConfigMap{}
	if err := e.k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cfg"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["value"] = "edited"
	if err := e.k.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cycle(); err == nil {
		t.Fatal("the refused commit is still the head: the cycle must report it")
	}
	if v, _ := e.value("cfg"); v != "good" {
		t.Fatalf("drift not corrected from the accepted revision: %q", v)
	}

	next := e.push([]unit{configMapUnit("cfg", ns, "better")})
	st, err = e.cycle()
	if err != nil || !strings.HasSuffix(st.AppliedRevision, next) || st.LastError != "" {
		t.Fatalf("accepted commit: %v %+v", err, st)
	}
	if v, _ := e.value("cfg"); v != "better" {
		t.Errorf("value %q", v)
	}
}

// TestLoopLastAcceptedRevisionSurvivesRestart: the last accepted revision
// is kept in the cluster's state object, so a restarted agent (a new loop
// with an empty cache) whose head is refused still corrects drift from it;
// a corrupt record is never trusted.
func TestLoopLastAcceptedRevisionSurvivesRestart(t *testing.T) {
	var mu sync.Mutex
	refused := map[string]bool{}
	verifier := reconcile.VerifierFunc(func(_ context.Context, head gitrepo.Result) (*status.Verification, error) {
		mu.Lock()
		defer mu.Unlock()
		if refused[head.Hash] {
			return &status.Verification{Mode: "test", Message: "untrusted"}, errors.New("signed by an untrusted key")
		}
		return &status.Verification{Mode: "test", Verified: true, Signer: "tester"}, nil
	})
	ns := "restart-apps"
	e := newEnv(t, "restart", []unit{configMapUnit("cfg", ns, "good")}, verifier)
	store := &truststate.Store{Client: e.k, Namespace: "flotilla-" + e.name}
	e.loop = e.newLoop(verifier, store)
	st, err := e.cycle()
	if err != nil {
		t.Fatalf("first cycle: %v %+v", err, st)
	}
	good := st.AppliedRevision
	if rev, err := store.LoadAccepted(context.Background()); err != nil || rev != good {
		t.Fatalf("recorded revision %q, %v; want %s", rev, err, good)
	}

	bad := e.push([]unit{configMapUnit("cfg", ns, "evil")})
	mu.Lock()
	refused[bad] = true
	mu.Unlock()
	edit := func(value string) {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := e.k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cfg"}, cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["value"] = value
		if err := e.k.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
	}

	// Restart: a new loop, an empty cache, the head refused.
	e.loop = e.newLoop(verifier, store)
	edit("edited")
	st, err = e.cycle()
	if err == nil || !strings.Contains(st.LastError, "untrusted") {
		t.Fatalf("refused head after a restart: %v %+v", err, st)
	}
	if u := unitStatus(st, "cfg"); u == nil || u.AppliedRevision != good || !strings.HasSuffix(st.FetchedRevision, bad) {
		t.Errorf("unit %+v, fetched %s; want it applied at %s", u, st.FetchedRevision, good)
	}
	if v, _ := e.value("cfg"); v != "good" {
		t.Fatalf("drift not corrected from the last accepted revision after a restart: %q", v)
	}

	// A corrupt record is not trusted: nothing is reconciled.
	cm := &corev1.ConfigMap{}
	if err := e.k.Get(context.Background(), client.ObjectKey{Namespace: "flotilla-" + e.name, Name: truststate.DefaultName}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[truststate.KeyLastAccepted] = "main@sha1:not-a-commit"
	if err := e.k.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	if _, err := store.LoadAccepted(context.Background()); !errors.Is(err, truststate.ErrCorrupt) {
		t.Errorf("LoadAccepted of a corrupt record: %v, want ErrCorrupt", err)
	}
	e.loop = e.newLoop(verifier, store)
	edit("edited-again")
	st, err = e.cycle()
	if !errors.Is(err, truststate.ErrCorrupt) || len(st.Units) != 0 || !strings.Contains(st.LastError, "corrupt") {
		t.Errorf("with a corrupt record: %v, units %+v, last error %q", err, st.Units, st.LastError)
	}
	if v, _ := e.value("cfg"); v != "edited-again" {
		t.Errorf("a corrupt record was trusted: value %q", v)
	}
}

func TestLoopUnreadableSliceLeavesUnitsAsTheyAre(t *testing.T) {
	ns := "broken-apps"
	e := newEnv(t, "broken", []unit{configMapUnit("cfg", ns, "v1")}, nil)
	if _, err := e.cycle(); err != nil {
		t.Fatal(err)
	}
	writeSlice(t, e.dir, e.name, []unit{configMapUnit("cfg", ns, "v2")})
	p := filepath.Join(e.dir, filepath.FromSlash(slice.SlicePath(e.name)))
	data, _ := os.ReadFile(p)
	if err := os.WriteFile(p, append(data, []byte("bogus: field\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, rel := range []string{slice.SlicePath(e.name), slice.UnitDir(e.name, "cfg") + "/cm.yaml"} {
		b, _ := os.ReadFile(filepath.Join(e.dir, filepath.FromSlash(rel)))
		files[rel] = string(b)
	}
	e.srv.Commit(t, e.name, gitserver.Maintainer, files, nil, "break the slice")
	st, err := e.cycle()
	if !errors.Is(err, slice.ErrInvalidSlice) || !strings.Contains(st.LastError, "invalid slice") {
		t.Fatalf("cycle error %v, status %q", err, st.LastError)
	}
	if c := apimeta.FindStatusCondition(st.Conditions, status.ConditionStalled); c == nil || c.Status != "True" {
		t.Errorf("not Stalled: %+v", st.Conditions)
	}
	if v, _ := e.value("cfg"); v != "v1" {
		t.Errorf("value %q after an unreadable slice, want v1", v)
	}
	if u := unitStatus(st, "cfg"); readyReason(u) != "True/"+status.ReasonSucceeded {
		t.Errorf("unit of the last accepted revision: %s", readyReason(u))
	}
}

func TestLoopUnitsLeavingTheSliceHonourTheirPruneFlag(t *testing.T) {
	ns := "leave-apps"
	kept := configMapUnit("kept", ns, "x")
	kept.noPrune = true
	// Two of four units leave: not more than the default hold fraction.
	e := newEnv(t, "leave", []unit{configMapUnit("stay", ns, "x"), configMapUnit("stay2", ns, "x"), configMapUnit("pruned", ns, "x"), kept}, nil)
	if _, err := e.cycle(); err != nil {
		t.Fatal(err)
	}
	e.push([]unit{configMapUnit("stay", ns, "x"), configMapUnit("stay2", ns, "x")})
	st, err := e.cycle()
	if err != nil || len(st.Units) != 2 {
		t.Fatalf("cycle: %v %+v", err, st)
	}
	if _, err := e.value("pruned"); !apierrors.IsNotFound(err) {
		t.Errorf("unit pruned (prune: true) left its ConfigMap: %v", err)
	}
	if _, err := e.value("kept"); err != nil {
		t.Errorf("unit kept (prune: false) lost its ConfigMap: %v", err)
	}
	if _, err := e.value("stay"); err != nil {
		t.Errorf("unit stay: %v", err)
	}
	units, err := e.applier.Units(context.Background())
	if err != nil || strings.Join(units, ",") != "stay,stay2" {
		t.Errorf("inventories left: %v %v", units, err)
	}
}

// TestLoopEmptyRenderNeverPrunesUnlessAllowed: a unit whose new revision
// renders no objects keeps everything it applied (no write at all) and
// reports the stalled apply; with allowEmpty the same render prunes it.
func TestLoopEmptyRenderNeverPrunesUnlessAllowed(t *testing.T) {
	ns := "empty-apps"
	e := newEnv(t, "empty", []unit{configMapUnit("cfg", ns, "v1"), configMapUnit("other", ns, "v1")}, nil)
	if _, err := e.cycle(); err != nil {
		t.Fatal(err)
	}
	empty := unit{name: "cfg", files: map[string]string{"kustomization.yaml": "resources: []\n"}}
	e.push([]unit{empty, configMapUnit("other", ns, "v2")})
	e.counter.Reset()
	st, err := e.cycle()
	if err != nil {
		t.Fatal(err)
	}
	u := unitStatus(st, "cfg")
	if r := readyReason(u); r != "False/"+status.ReasonApplyFailed || !strings.Contains(u.LastError, "allowEmpty") {
		t.Fatalf("empty unit: %s %+v", r, u)
	}
	if c := apimeta.FindStatusCondition(u.Conditions, status.ConditionStalled); c == nil || c.Status != "True" {
		t.Errorf("empty unit not Stalled: %+v", u.Conditions)
	}
	if v, err := e.value("cfg"); err != nil || v != "v1" {
		t.Fatalf("the empty render touched the unit's ConfigMap: %q %v", v, err)
	}
	// The independent unit went ahead: its object and inventory are the
	// cycle's only writes.
	if v, _ := e.value("other"); v != "v2" || readyReason(unitStatus(st, "other")) != "True/"+status.ReasonSucceeded {
		t.Errorf("unit other: %q %s", v, readyReason(unitStatus(st, "other")))
	}
	if w := e.counter.Writes(); w != 2 {
		t.Errorf("%d writes, want 2 (unit other's ConfigMap and inventory)", w)
	}
	inv, err := e.applier.Inventory(context.Background(), "cfg")
	if err != nil || len(inv.Entries) != 1 {
		t.Fatalf("inventory of the empty unit: %+v %v", inv, err)
	}

	empty.allowEmpty = true
	e.push([]unit{empty, configMapUnit("other", ns, "v2")})
	st, err = e.cycle()
	if err != nil || readyReason(unitStatus(st, "cfg")) != "True/"+status.ReasonSucceeded {
		t.Fatalf("allowEmpty: %v %s", err, readyReason(unitStatus(st, "cfg")))
	}
	if _, err := e.value("cfg"); !apierrors.IsNotFound(err) {
		t.Errorf("allowEmpty did not prune the ConfigMap: %v", err)
	}
}

// TestSourceStaleIsRefused: sources pushed without re-rendering (the
// slice's hash unchanged) are never applied, not even to a unit that
// drifted; the unit reports SourceStale and its drift is corrected from the
// last content it was verified at.
func TestSourceStaleIsRefused(t *testing.T) {
	e := newEnv(t, "stale", []unit{configMapUnit("cfg", "stale-apps", "reviewed")}, nil)
	if st, err := e.cycle(); err != nil || readyReason(unitStatus(st, "cfg")) != "True/"+status.ReasonSucceeded {
		t.Fatalf("first cycle: %v %+v", err, st)
	}

	// Change the unit's source, leaving slice.yaml (and its hash) alone.
	unreviewed := configMapUnit("cfg", "stale-apps", "unreviewed").files["cm.yaml"]
	cm := filepath.Join(e.dir, filepath.FromSlash(slice.UnitDir("stale", "cfg")), "cm.yaml")
	if err := os.WriteFile(cm, []byte(unreviewed), 0o644); err != nil {
		t.Fatal(err)
	}
	e.srv.Commit(t, e.name, gitserver.Maintainer, map[string]string{
		filepath.ToSlash(mustRel(t, e.dir, cm)): unreviewed,
	}, nil, "unreviewed source")
	if _, err := e.cycle(); err != nil {
		t.Fatalf("cycle at the unreviewed commit: %v", err)
	}
	if v, _ := e.value("cfg"); v != "reviewed" {
		t.Fatalf("value %q after the unreviewed push", v)
	}

	// Drift makes the unit be rendered again: it must be refused.
	live := &corev1.ConfigMap{}
	if err := e.k.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "cfg"}, live); err != nil {
		t.Fatal(err)
	}
	live.Data["value"] = "edited"
	if err := e.k.Update(context.Background(), live, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	st, _ := e.cycle()
	u := unitStatus(st, "cfg")
	if got := readyReason(u); got != "False/"+status.ReasonSourceStale {
		t.Errorf("Ready = %s, want False/%s (%+v)", got, status.ReasonSourceStale, u)
	}
	if v, _ := e.value("cfg"); v != "reviewed" {
		t.Errorf("value %q, want the drift restored to the reviewed content", v)
	}
}

func mustRel(t *testing.T, base, p string) string {
	t.Helper()
	rel, err := filepath.Rel(base, p)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// TestLoopRunPollsWhileCyclesRun runs the loop as the agent does (Run):
// Git is synced between cycles (Run's polls), at a cycle's start and
// while a cycle's units wait (the watch), all touching the state the loop
// carries between cycles. Three revisions pushed while it runs, one of
// them with a unit that waits, are each reconciled. Run it under -race
// (go test -race -run TestLoopRunPollsWhileCyclesRun ./agent/reconcile):
// the syncs must not race.
func TestLoopRunPollsWhileCyclesRun(t *testing.T) {
	const name = "runpolls"
	ns := name + "-apps"
	e := newEnv(t, name, []unit{configMapUnit("a", ns, "1")}, nil)
	loop, err := reconcile.New(reconcile.Config{
		Cluster: e.name,
		Source: &gitrepo.Source{URL: e.url, Auth: gitrepo.Auth{Username: gitserver.Maintainer, Password: e.srv.Password(gitserver.Maintainer)},
			CacheDir: t.TempDir(), Timeout: 10 * time.Second},
		Applier: e.applier, Discovery: e.disc, Interval: 400 * time.Millisecond, PollInterval: 50 * time.Millisecond, Workers: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	applied := func(rev string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if st := loop.Status(); st != nil && st.AppliedRevision == rev {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not applied: %+v", rev, loop.Status())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i, units := range [][]unit{
		{configMapUnit("a", ns, "2")},
		{configMapUnit("a", ns, "3"), deploymentUnit("waits", ns, "waits:1")},
		{configMapUnit("a", ns, "4")},
	} {
		rev := "main@sha1:" + e.push(units)
		if i == 1 {
			// The Deployment never becomes Ready here: the cycle waits,
			// and the next push ends the wait through the watch.
			continue
		}
		applied(rev)
	}
	if v, err := e.value("a"); err != nil || v != "4" {
		t.Errorf("ConfigMap a: %q %v, want 4", v, err)
	}
}
