package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/truststate"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testkeys"
)

// verifyFleet is a one-cluster fleet whose only application is a ConfigMap
// holding value, in a namespace of the cluster's own.
func verifyFleet(cluster, value string) map[string]string {
	return map[string]string{
		"clusters/" + cluster + ".yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + cluster + "\n  labels:\n    env: " + cluster + "\n",
		"fleets/" + cluster + ".yaml":   "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: " + cluster + "\nspec:\n  selector:\n    matchLabels:\n      env: " + cluster + "\n  namespaces:\n    - name: " + cluster + "-app\n",
		"apps/settings/app.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: settings\nspec:\n  source:\n    manifests:\n      path: manifests\n  namespace: " + cluster + "-app\n" +
			"  syncPolicies:\n    - name: all\n      destination:\n        fleet: " + cluster + "\n",
		"apps/settings/manifests/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  value: " + value + "\n",
	}
}

// verifyRig is a fleet repo on the Git server, its working directory and
// an agent process verifying commits against keysDir.
type verifyRig struct {
	t       *testing.T
	cluster string
	repo    *fleetrepo.Repo
	keysDir string
	agent   *agentProc
	// generation numbers the keys directory's Secret updates.
	generation int
	procs      int // agent processes started
	mode       string
	agentNS    string
	creds      string
	// flags are added to every agent process's arguments.
	flags []string
	// afterPush runs after every commit pushed (publishing slices).
	afterPush func()
}

func newVerifyRig(t *testing.T, cluster, mode string, trusted ...testkeys.Key) *verifyRig {
	t.Helper()
	return newVerifyRigOn(t, agentGit(t), cluster, mode, nil, trusted...)
}

// newVerifyRigOn is newVerifyRig on srv, with flags for every agent
// process. The agent starts at once.
func newVerifyRigOn(t *testing.T, srv *gitserver.Server, cluster, mode string, flags []string, trusted ...testkeys.Key) *verifyRig {
	t.Helper()
	c := agentCluster(t)
	dir := t.TempDir()
	planWriteFiles(t, dir, verifyFleet(cluster, "initial"))
	hubRender(t, dir)
	r := &verifyRig{t: t, cluster: cluster, repo: fleetrepo.New(t, srv, cluster, dir), keysDir: t.TempDir(), flags: flags}
	r.trust(trusted...)
	agentNS := "flotilla-" + cluster
	if err := c.CreateNamespace(testCtx(t), agentNS); err != nil {
		t.Fatal(err)
	}
	r.mode, r.agentNS, r.creds = mode, agentNS, agentUser(t, srv, cluster)
	r.start()
	return r
}

// start runs a new agent process with an empty cache directory (a new
// pod: its emptyDir is gone), extra flags appended.
func (r *verifyRig) start(extra ...string) {
	r.t.Helper()
	r.procs++
	args := append(append([]string{"--interval", "2s", "--verify-mode", r.mode, "--verify-keys-dir", r.keysDir}, r.flags...), extra...)
	r.agent = startAgentProc(r.t, agentCluster(r.t), r.repo, r.cluster, r.agentNS, fmt.Sprintf("%s-%d", r.cluster, r.procs), r.t.TempDir(), r.creds, args...)
}

// restart kills the agent and starts a new one with an empty cache.
func (r *verifyRig) restart(extra ...string) {
	r.t.Helper()
	r.agent.kill()
	r.start(extra...)
}

// stateObject is the agent's trust state ConfigMap.
func (r *verifyRig) stateObject() *corev1.ConfigMap {
	r.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := agentCluster(r.t).Client().Get(testCtx(r.t), client.ObjectKey{Namespace: r.agentNS, Name: truststate.DefaultName}, cm); err != nil {
		r.t.Fatalf("state object: %v", err)
	}
	return cm
}

// trust updates the keys directory as the kubelet updates a mounted
// Secret: the keys are written to a new hidden directory, the ..data
// symlink is swapped to it atomically, and every key is a symlink through
// ..data (the agent never sees a half-written set).
func (r *verifyRig) trust(keys ...testkeys.Key) {
	r.t.Helper()
	r.generation++
	gen := fmt.Sprintf("..gen-%d", r.generation)
	if err := os.Mkdir(filepath.Join(r.keysDir, gen), 0o755); err != nil {
		r.t.Fatal(err)
	}
	names := map[string]bool{}
	for i, k := range keys {
		name := "key-" + string(rune('a'+i))
		names[name] = true
		if err := os.WriteFile(filepath.Join(r.keysDir, gen, name), []byte(k.Public), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(r.keysDir, "..data"))
	tmp := filepath.Join(r.keysDir, "..data_tmp")
	if err := os.Symlink(gen, tmp); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(r.keysDir, "..data")); err != nil {
		r.t.Fatal(err)
	}
	entries, _ := os.ReadDir(r.keysDir)
	for _, e := range entries {
		if n := e.Name(); !strings.HasPrefix(n, ".") && !names[n] {
			os.Remove(filepath.Join(r.keysDir, n))
		}
	}
	for name := range names {
		link := filepath.Join(r.keysDir, name)
		if _, err := os.Lstat(link); err == nil {
			continue // already points through ..data
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			r.t.Fatal(err)
		}
	}
	if old != "" {
		os.RemoveAll(filepath.Join(r.keysDir, old))
	}
}

// commit changes the ConfigMap's value, renders, and pushes the change to
// main as one commit, signed by k (unsigned when k is nil).
func (r *verifyRig) commit(value string, k *testkeys.Key) string {
	r.t.Helper()
	planWriteFiles(r.t, r.repo.Dir, map[string]string{"apps/settings/manifests/configmap.yaml": verifyFleet(r.cluster, value)["apps/settings/manifests/configmap.yaml"]})
	hubRender(r.t, r.repo.Dir)
	if k == nil {
		rev := r.repo.Push(r.t, "unsigned change to "+value)
		if r.afterPush != nil {
			r.afterPush()
		}
		return rev
	}
	rev := r.repo.PushSigned(r.t, "signed change to "+value, k.Signer)
	if r.afterPush != nil {
		r.afterPush()
	}
	return rev
}

// driftCorrected edits the live ConfigMap's value and waits until the
// agent has put want back.
func (r *verifyRig) driftCorrected(want, what string) {
	r.t.Helper()
	k := agentCluster(r.t).Client()
	cm := &corev1.ConfigMap{}
	if err := k.Get(testCtx(r.t), client.ObjectKey{Namespace: r.cluster + "-app", Name: "settings"}, cm); err != nil {
		r.t.Fatal(err)
	}
	cm.Data["value"] = "edited"
	if err := k.Update(testCtx(r.t), cm); err != nil {
		r.t.Fatal(err)
	}
	waitFor(r.t, 2*time.Minute, what, func() (bool, string) {
		v := r.value()
		return v == want, "value " + v
	})
}

// value is the live ConfigMap's value ("" when absent).
func (r *verifyRig) value() string {
	r.t.Helper()
	cm := &corev1.ConfigMap{}
	if err := agentCluster(r.t).Client().Get(testCtx(r.t), client.ObjectKey{Namespace: r.cluster + "-app", Name: "settings"}, cm); err != nil {
		return ""
	}
	return cm.Data["value"]
}

func (r *verifyRig) waitApplied(rev, value string) *status.ClusterStatus {
	r.t.Helper()
	st := r.agent.waitStatus(2*time.Minute, "applied "+rev, func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == rev && st.Verification != nil && st.Verification.Verified
	})
	if got := r.value(); got != value {
		r.t.Errorf("live value %q after %s, want %q", got, rev, value)
	}
	return st
}

// waitRefused waits until status reports rev refused, then checks over a
// few more cycles that the cluster kept value.
func (r *verifyRig) waitRefused(rev, reason, value string) *status.ClusterStatus {
	r.t.Helper()
	st := r.agent.waitStatus(2*time.Minute, "refused "+rev, func(st *status.ClusterStatus) bool {
		return st.FetchedRevision == rev && st.Verification != nil && !st.Verification.Verified &&
			strings.Contains(st.LastError, "("+reason+")")
	})
	if c := condOf(st.Conditions, status.ConditionReady); c == nil || c.Reason != status.ReasonVerificationFailed {
		r.t.Errorf("Ready condition %+v, want reason %s", c, status.ReasonVerificationFailed)
	}
	// Two more cycles, counted rather than slept for: a slow machine may
	// run fewer than two in any fixed time.
	cycles := r.agent.countLogs("cycle finished")
	waitFor(r.t, 2*time.Minute, "two more cycles", func() (bool, string) {
		n := r.agent.countLogs("cycle finished") - cycles
		return n >= 2, fmt.Sprintf("%d more cycles", n)
	})
	if got := r.value(); got != value {
		r.t.Errorf("live value %q while %s is refused, want %q", got, rev, value)
	}
	if st := r.agent.status(); st == nil || st.AppliedRevision == rev {
		r.t.Errorf("the refused revision %s is reported applied", rev)
	}
	if n, ok := r.agent.metric(`flotilla_verification_failures_total{reason="` + reason + `"}`); !ok || n < 1 {
		r.t.Errorf("flotilla_verification_failures_total{reason=%q} = %v (found %v), want ≥ 1", reason, n, ok)
	}
	return st
}

// TestVerifyHeadMode: an agent in head mode applies a head signed by a
// trusted key (SSH or OpenPGP), refuses an unsigned head and one signed by
// an untrusted key — the cluster keeps the last accepted revision, status
// and the metric say why — and accepts that head once its key is added to
// the keys directory, without a restart.
func TestVerifyHeadMode(t *testing.T) {
	alice, bob := testkeys.SSH(t, "alice@example.com"), testkeys.PGP(t, "Bob")
	r := newVerifyRig(t, "verify-head", "head", alice)
	pid := r.agent.Pid()

	// The repository's first commit is unsigned: nothing is applied.
	r.waitRefused(r.repo.Head(), "unsigned", "")

	rev := r.commit("signed-by-alice", &alice)
	st := r.waitApplied(rev, "signed-by-alice")
	if !strings.Contains(st.Verification.Signer, "alice@example.com") || st.Verification.Mode != "head" {
		t.Errorf("verification %+v", st.Verification)
	}

	unsigned := r.commit("unsigned", nil)
	r.waitRefused(unsigned, "unsigned", "signed-by-alice")

	byBob := r.commit("signed-by-bob", &bob)
	st = r.waitRefused(byBob, "untrusted_signer", "signed-by-alice")
	if strings.Contains(st.LastError, "PRIVATE KEY") || strings.Contains(st.Verification.Message, "BEGIN PGP") {
		t.Error("key material in status")
	}

	// Key rotation: the Secret now trusts Bob (and no longer Alice).
	r.trust(bob)
	st = r.waitApplied(byBob, "signed-by-bob")
	if !strings.Contains(st.Verification.Signer, "Bob") {
		t.Errorf("verification %+v", st.Verification)
	}
	if !r.agent.running() || r.agent.Pid() != pid {
		t.Error("the agent restarted")
	}
}

// TestVerifyStrictMode: in strict mode the operator's trust root starts
// the chain; later, a trusted head over an unsigned ancestor is refused,
// while every-commit-signed history is applied.
func TestVerifyStrictMode(t *testing.T) {
	alice := testkeys.SSH(t, "alice@example.com")
	r := newVerifyRig(t, "verify-strict", "strict", alice)
	// The operator vouches for the (unsigned) initial commit.
	r.restart("--verify-trust-root", strings.TrimPrefix(r.repo.Head(), "main@sha1:"))

	first := r.commit("first", &alice)
	st := r.waitApplied(first, "first")
	if !strings.Contains(st.Verification.Message, "since the trust root") {
		t.Errorf("verification %+v", st.Verification)
	}

	r.commit("signed-1", &alice)
	second := r.commit("signed-2", &alice)
	r.waitApplied(second, "signed-2")

	r.commit("sneaked-in", nil)
	head := r.commit("signed-on-top", &alice)
	st = r.waitRefused(head, "unsigned", "signed-2")
	if !strings.Contains(st.Verification.Message, "not signed") {
		t.Errorf("verification %+v", st.Verification)
	}
}

// TestVerifyStrictAnchorInCluster: strict mode's anchor lives in the
// cluster and fails closed. With no anchor and no trust root every head is
// refused; a trust root starts it; a new agent process with an empty cache
// continues from the recorded anchor, so a trusted head over an unsigned
// ancestor is refused, not accepted as a first commit, while drift is
// still corrected from the last accepted revision; a corrupt anchor is
// refused, never trusted, even where the trust root would accept the head.
func TestVerifyStrictAnchorInCluster(t *testing.T) {
	alice := testkeys.SSH(t, "alice@example.com")
	r := newVerifyRig(t, "verify-anchor", "strict", alice)
	hashOf := func(rev string) string { return strings.TrimPrefix(rev, "main@sha1:") }

	first := r.commit("first", &alice)
	st := r.waitRefused(first, "no_anchor", "")
	if !strings.Contains(st.LastError, "--verify-trust-root") {
		t.Errorf("the refusal does not say how to start: %q", st.LastError)
	}

	r.restart("--verify-trust-root", hashOf(first))
	r.waitApplied(first, "first")
	second := r.commit("signed-2", &alice)
	r.waitApplied(second, "signed-2")
	waitFor(t, time.Minute, "the anchor and the accepted revision in the cluster", func() (bool, string) {
		d := r.stateObject().Data
		return d[truststate.KeyVerifyAnchor] == hashOf(second) && d[truststate.KeyLastAccepted] == second, fmt.Sprint(d)
	})

	// While no agent runs, an unsigned commit slips in under a signed one.
	r.agent.kill()
	r.commit("sneaked-in", nil)
	head := r.commit("signed-on-top", &alice)
	r.start("--verify-trust-root", hashOf(first))
	r.waitRefused(head, "unsigned", "signed-2")
	// Drift is corrected from the last accepted revision, which this
	// process never fetched as a head.
	r.driftCorrected("signed-2", "drift corrected from the last accepted revision")
	k := agentCluster(t).Client()

	// A corrupt anchor refuses, even though the trust root named now is
	// the head itself.
	obj := r.stateObject()
	obj.Data[truststate.KeyVerifyAnchor] = "not-a-commit"
	if err := k.Update(testCtx(t), obj); err != nil {
		t.Fatal(err)
	}
	r.restart("--verify-trust-root", hashOf(head))
	st = r.waitRefused(head, "state_unavailable", "signed-2")
	if !strings.Contains(st.LastError, "corrupt") {
		t.Errorf("the refusal does not say the state is corrupt: %q", st.LastError)
	}
	if got := r.stateObject().Data[truststate.KeyVerifyAnchor]; got != "not-a-commit" {
		t.Errorf("the corrupt anchor was overwritten with %q", got)
	}
}
