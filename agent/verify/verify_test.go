package verify_test

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/agent/verify"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/prereqs"
	"github.com/flotilla-gitops/flotilla/test/testkeys"
)

// fixture is a repository on a real Git server, an agent-side Source of it
// and a keys directory.
type fixture struct {
	t       *testing.T
	srv     *gitserver.Server
	src     *gitrepo.Source
	keysDir string
	n       int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := gitserver.Start(t, gitserver.ForgeConfig())
	init := t.TempDir()
	if err := os.WriteFile(filepath.Join(init, "README"), []byte("fleet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url := srv.MustCreateRepo(t, "fleet", init)
	f := &fixture{t: t, srv: srv, keysDir: t.TempDir()}
	f.src = &gitrepo.Source{URL: url, Branch: "main", CacheDir: t.TempDir(), Timeout: 20 * time.Second,
		Auth: gitrepo.Auth{Username: gitserver.Maintainer, Password: srv.Password(gitserver.Maintainer)}}
	return f
}

// push commits a change to main, signed by k (unsigned when k is nil).
func (f *fixture) push(k *testkeys.Key) string {
	f.t.Helper()
	f.n++
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := gitrepo.PushOptions{Auth: f.src.Auth}
	if k != nil {
		opts.Signer = k.Signer
	}
	res, err := gitrepo.PushFiles(ctx, f.src.URL, "refs/heads/main",
		map[string][]byte{"file.txt": []byte(strings.Repeat("x", f.n))}, "change", gitrepo.Signature{Name: "dev", Email: "dev@example.com"}, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return res.Hash
}

func (f *fixture) trust(keys ...testkeys.Key) {
	f.t.Helper()
	entries, _ := os.ReadDir(f.keysDir)
	for _, e := range entries {
		os.Remove(filepath.Join(f.keysDir, e.Name()))
	}
	for i, k := range keys {
		if err := os.WriteFile(filepath.Join(f.keysDir, "key"+string(rune('0'+i))), []byte(k.Public), 0o600); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) sync() gitrepo.Result {
	f.t.Helper()
	res, err := f.src.Sync(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// memAnchor stands in for the cluster's state object (agent/truststate, tested
// against a real API server in test/e2e).
type memAnchor struct {
	hash string
	err  error
}

func (a *memAnchor) LoadAnchor(context.Context) (string, error) { return a.hash, a.err }

func (a *memAnchor) StoreAnchor(_ context.Context, h string) error {
	if a.err != nil {
		return a.err
	}
	a.hash = h
	return nil
}

func (f *fixture) verifier(mode verify.Mode, anchor *memAnchor, root string) (*verify.Verifier, *[]string) {
	f.t.Helper()
	var refused []string
	if anchor == nil {
		anchor = &memAnchor{}
	}
	v, err := verify.New(verify.Config{Mode: mode, KeysDir: f.keysDir, Commits: f.src, Anchor: anchor, TrustRoot: root,
		OnRefused: func(r string) { refused = append(refused, r) }})
	if err != nil {
		f.t.Fatal(err)
	}
	return v, &refused
}

func wantRefused(t *testing.T, err error, reason, commit string, cause error) {
	t.Helper()
	var re *verify.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, verify.ErrRefused) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if re.Reason != reason {
		t.Errorf("reason %q, want %q (%v)", re.Reason, reason, err)
	}
	if commit != "" && re.Commit != commit {
		t.Errorf("refused commit %s, want %s", re.Commit, commit)
	}
	if cause != nil && !errors.Is(err, cause) {
		t.Errorf("err %v is not %v", err, cause)
	}
}

func TestHeadMode(t *testing.T) {
	f := newFixture(t)
	alice, bob, carol := testkeys.SSH(t, "alice@example.com"), testkeys.PGP(t, "Bob"), testkeys.SSH(t, "carol@example.com")
	f.trust(alice, bob)
	v, refused := f.verifier(verify.ModeHead, nil, "")
	ctx := context.Background()

	f.push(&alice)
	st, err := v.Verify(ctx, f.sync())
	if err != nil {
		t.Fatalf("SSH-signed by a trusted key: %v", err)
	}
	if !st.Verified || st.Mode != "head" || !strings.Contains(st.Signer, "alice@example.com") || !strings.Contains(st.Signer, "SHA256:") {
		t.Errorf("status %+v", st)
	}

	f.push(&bob)
	if st, err := v.Verify(ctx, f.sync()); err != nil || !strings.Contains(st.Signer, "Bob") {
		t.Fatalf("OpenPGP-signed by a trusted key: %+v %v", st, err)
	}

	head := f.push(nil)
	st, err = v.Verify(ctx, f.sync())
	wantRefused(t, err, verify.ReasonUnsigned, head, signature.ErrUnsigned)
	if st == nil || st.Verified || !strings.Contains(st.Message, "unsigned") {
		t.Errorf("status of a refusal %+v", st)
	}

	head = f.push(&carol)
	_, err = v.Verify(ctx, f.sync())
	wantRefused(t, err, verify.ReasonUntrustedSigner, head, signature.ErrUntrustedSigner)

	// Key rotation: the same Verifier accepts carol once her key is in
	// the directory, and refuses alice's commits once hers is gone.
	f.trust(carol)
	if _, err := v.Verify(ctx, f.sync()); err != nil {
		t.Fatalf("after trusting carol: %v", err)
	}
	head = f.push(&alice)
	_, err = v.Verify(ctx, f.sync())
	wantRefused(t, err, verify.ReasonUntrustedSigner, head, nil)

	f.trust()
	_, err = v.Verify(ctx, f.sync())
	wantRefused(t, err, verify.ReasonKeysUnavailable, "", nil)

	if got := strings.Join(*refused, ","); got != "unsigned,untrusted_signer,untrusted_signer,keys_unavailable" {
		t.Errorf("OnRefused got %s", got)
	}
}

func TestStrictMode(t *testing.T) {
	f := newFixture(t)
	alice := testkeys.SSH(t, "alice@example.com")
	f.trust(alice)
	anchor := &memAnchor{}
	ctx := context.Background()

	// Nothing recorded and no trust root: refused, never "the first".
	first := f.push(&alice) // over the unsigned initial commit
	none, refused := f.verifier(verify.ModeStrict, anchor, "")
	st, err := none.Verify(ctx, f.sync())
	wantRefused(t, err, verify.ReasonNoAnchor, first, verify.ErrNoAnchor)
	if !strings.Contains(st.Message, "--verify-trust-root") || anchor.hash != "" {
		t.Errorf("status %+v, anchor %q", st, anchor.hash)
	}
	if got := strings.Join(*refused, ","); got != verify.ReasonNoAnchor {
		t.Errorf("OnRefused got %s", got)
	}

	// The operator names the trust root: accepted and recorded.
	v, _ := f.verifier(verify.ModeStrict, anchor, first)
	if st, err := v.Verify(ctx, f.sync()); err != nil || !strings.Contains(st.Message, "trust root") {
		t.Fatalf("the trust root: %+v %v", st, err)
	}
	if anchor.hash != first {
		t.Errorf("anchor %s, want %s", anchor.hash, first)
	}

	// A trusted head over signed ancestors.
	f.push(&alice)
	second := f.push(&alice)
	if st, err := v.Verify(ctx, f.sync()); err != nil || !strings.Contains(st.Message, "all 2 commits since") {
		t.Fatalf("two signed commits: %+v %v", st, err)
	}

	// A trusted head over an unsigned ancestor.
	unsigned := f.push(nil)
	f.push(&alice)
	_, err = v.Verify(ctx, f.sync())
	wantRefused(t, err, verify.ReasonUnsigned, unsigned, signature.ErrUnsigned)
	if anchor.hash != second {
		t.Errorf("a refusal moved the anchor to %s", anchor.hash)
	}

	// Head mode accepts the same head: only strict looks at ancestors.
	h, _ := f.verifier(verify.ModeHead, nil, "")
	if _, err := h.Verify(ctx, f.sync()); err != nil {
		t.Errorf("head mode: %v", err)
	}

	// A restarted agent continues from the recorded anchor, whatever its
	// trust root says: still refused.
	v2, _ := f.verifier(verify.ModeStrict, anchor, first)
	_, err = v2.Verify(ctx, f.sync())
	wantRefused(t, err, verify.ReasonUnsigned, unsigned, nil)

	// An unreadable or corrupt anchor refuses, even with a trust root.
	errCorrupt := errors.New("corrupt")
	anchor.err = errCorrupt
	_, err = v2.Verify(ctx, f.sync())
	wantRefused(t, err, verify.ReasonStateUnavailable, "", errCorrupt)
}

func TestStrictModeRefusesRewrittenHistory(t *testing.T) {
	f := newFixture(t)
	alice := testkeys.SSH(t, "alice@example.com")
	f.trust(alice)
	ctx := context.Background()
	root := f.push(&alice)
	v, _ := f.verifier(verify.ModeStrict, nil, root)
	if _, err := v.Verify(ctx, f.sync()); err != nil {
		t.Fatal(err)
	}
	// Someone rewrites main with an orphan commit, signed by a trusted key
	// with the git CLI (gpg.format=ssh): the head alone would pass.
	if err := f.srv.SetRules([]gitserver.Rule{{User: gitserver.Maintainer, Refs: []string{"refs/heads/*"}, Force: true}}); err != nil {
		t.Fatal(err)
	}
	orphan := gitSignedOrphan(t, f, alice)
	h, _ := f.verifier(verify.ModeHead, nil, "")
	if st, err := h.Verify(ctx, f.sync()); err != nil || !strings.Contains(st.Signer, "alice@example.com") {
		t.Fatalf("head mode refused a commit signed by git -S with a trusted SSH key: %+v %v", st, err)
	}
	_, err := v.Verify(ctx, f.sync())
	wantRefused(t, err, verify.ReasonHistoryRewritten, orphan, gitrepo.ErrNotAncestor)
}

// gitSignedOrphan force-pushes a new root commit to main, made and signed
// by the git CLI with k's SSH key.
func gitSignedOrphan(t *testing.T, f *fixture, k testkeys.Key) string {
	t.Helper()
	prereqs.Require(t, "ssh-keygen") // git's SSH signing runs it
	dir := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(keyFile, k.Private, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("rewritten\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=Alice", "-c", "user.email=alice@example.com",
			"-c", "gpg.format=ssh", "-c", "user.signingkey=" + keyFile,
			"-c", "http.extraHeader=Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(gitserver.Maintainer+":"+f.srv.Password(gitserver.Maintainer)))}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("add", "a")
	git("commit", "-q", "-S", "-m", "rewrite")
	git("push", "-q", "--force", f.src.URL, "HEAD:refs/heads/main")
	return git("rev-parse", "HEAD")
}

func TestNewAndParseMode(t *testing.T) {
	for in, want := range map[string]verify.Mode{"": verify.ModeNone, "none": verify.ModeNone, "HEAD": verify.ModeHead, "strict": verify.ModeStrict} {
		if got, err := verify.ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := verify.ParseMode("all"); err == nil {
		t.Error("ParseMode(all) accepted")
	}
	if _, err := verify.New(verify.Config{Mode: verify.ModeHead}); err == nil {
		t.Error("head mode without keys accepted")
	}
	if _, err := verify.New(verify.Config{Mode: verify.ModeStrict, KeysDir: t.TempDir(), Commits: &gitrepo.Source{}}); err == nil {
		t.Error("strict mode without an anchor store accepted")
	}
	v, err := verify.New(verify.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := v.Verify(context.Background(), gitrepo.Result{Hash: strings.Repeat("a", 40)}); st != nil || err != nil {
		t.Errorf("mode none: %+v, %v", st, err)
	}
}
