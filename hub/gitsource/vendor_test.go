package gitsource_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/gitsource"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// upstream serves "podinfo", a second repository whose deploy/ an
// application vendors.
func upstream(t *testing.T) (*gitserver.Server, gitrepo.Auth) {
	t.Helper()
	srv := gitserver.Start(t, gitserver.ForgeConfig())
	dir := t.TempDir()
	treefile.Write(t, dir, map[string]string{
		"deploy/kustomization.yaml": "resources: [cm.yaml]\n",
		"deploy/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo\ndata:\n  version: one\n",
		"README.md":                 "not vendored\n",
	})
	srv.MustCreateRepo(t, "podinfo", dir)
	return srv, gitrepo.Auth{Username: gitserver.Maintainer, Password: srv.Password(gitserver.Maintainer)}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func spec(srv *gitserver.Server) gitsource.Spec {
	return gitsource.Spec{App: "podinfo", URL: srv.URL("podinfo"), Ref: gitsource.Ref{Branch: "main"}, Path: "deploy", File: "apps/podinfo/app.yaml"}
}

func vendor(t *testing.T, root string, specs []gitsource.Spec, opts gitsource.Options) []gitsource.Result {
	t.Helper()
	res, err := gitsource.Vendor(context.Background(), root, specs, opts)
	if err != nil {
		t.Fatalf("Vendor: %v", err)
	}
	return res
}

// staleProblems runs Vendor in check mode and returns its problems.
func staleProblems(t *testing.T, root string, specs []gitsource.Spec) []gitsource.Problem {
	t.Helper()
	_, err := gitsource.Vendor(context.Background(), root, specs, gitsource.Options{Check: true})
	if err == nil {
		return nil
	}
	var stale *gitsource.StaleError
	if !errors.As(err, &stale) || !errors.Is(err, gitsource.ErrStale) {
		t.Fatalf("check: %v, want a *StaleError", err)
	}
	return stale.Problems
}

func TestVendorPinsAndChecks(t *testing.T) {
	srv, auth := upstream(t)
	root := t.TempDir()
	first := srv.Head("podinfo", "main")
	s := spec(srv)
	opts := gitsource.Options{Auth: auth}

	// Not vendored yet: check says so, without the network.
	before := srv.Stats("podinfo")
	if p := staleProblems(t, root, []gitsource.Spec{s}); len(p) != 1 || p[0].App != "podinfo" || p[0].File != "sources/podinfo.lock.yaml" {
		t.Fatalf("check before vendoring: %v", p)
	}
	if d := srv.Stats("podinfo").Sub(before); d.InfoRefs+d.LsRefs+d.UploadPacks != 0 {
		t.Fatalf("check used the network: %+v", d)
	}

	// Vendored at the branch's commit, the subtree only.
	res := vendor(t, root, []gitsource.Spec{s}, opts)
	if len(res) != 1 || res[0].Action != "vendored" || res[0].Commit != first || res[0].Dir != "sources/podinfo" {
		t.Fatalf("first vendor: %+v", res)
	}
	if got := read(t, filepath.Join(root, "sources/podinfo/cm.yaml")); !strings.Contains(got, "version: one") {
		t.Fatalf("vendored cm.yaml: %q", got)
	}
	if _, err := os.Stat(filepath.Join(root, "sources/podinfo/README.md")); err == nil {
		t.Fatal("a file outside path was vendored")
	}
	lock := read(t, filepath.Join(root, "sources/podinfo.lock.yaml"))
	for _, want := range []string{"commit: " + first, "branch: main", "path: deploy", "kind: SourceLock", "url: " + srv.URL("podinfo")} {
		if !strings.Contains(lock, want) {
			t.Errorf("lock lacks %q:\n%s", want, lock)
		}
	}
	if p := staleProblems(t, root, []gitsource.Spec{s}); p != nil {
		t.Fatalf("check right after vendoring: %v", p)
	}

	// The branch moves upstream: a plain vendor changes nothing and does
	// not even ask the server.
	srv.Commit(t, "podinfo", gitserver.Maintainer, map[string]string{"deploy/cm.yaml": strings.Replace(read(t, filepath.Join(root, "sources/podinfo/cm.yaml")), "one", "two", 1)}, nil, "two")
	second := srv.Head("podinfo", "main")
	before = srv.Stats("podinfo")
	res = vendor(t, root, []gitsource.Spec{s}, opts)
	if res[0].Action != "unchanged" || res[0].Commit != first || read(t, filepath.Join(root, "sources/podinfo.lock.yaml")) != lock {
		t.Fatalf("vendor after the branch moved: %+v", res)
	}
	if d := srv.Stats("podinfo").Sub(before); d.InfoRefs+d.LsRefs+d.UploadPacks != 0 {
		t.Fatalf("a pinned source used the network: %+v", d)
	}

	// --update-sources moves it.
	res = vendor(t, root, []gitsource.Spec{s}, gitsource.Options{Auth: auth, Update: true})
	if res[0].Action != "updated" || res[0].Commit != second {
		t.Fatalf("update: %+v, want commit %s", res, second)
	}
	if got := read(t, filepath.Join(root, "sources/podinfo/cm.yaml")); !strings.Contains(got, "version: two") {
		t.Fatalf("updated cm.yaml: %q", got)
	}
	if !strings.Contains(read(t, filepath.Join(root, "sources/podinfo.lock.yaml")), "commit: "+second) {
		t.Fatal("the lock does not pin the new commit")
	}
	if res = vendor(t, root, []gitsource.Spec{s}, gitsource.Options{Auth: auth, Update: true}); res[0].Action != "unchanged" {
		t.Fatalf("a second update: %+v", res)
	}

	// Someone edits the vendored copy: check names the application and
	// the directory; a plain vendor restores the pinned tree offline of
	// any ref resolution.
	cm := filepath.Join(root, "sources/podinfo/cm.yaml")
	pinned := read(t, cm)
	if err := os.WriteFile(cm, []byte(pinned+"  extra: hand-edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := staleProblems(t, root, []gitsource.Spec{s})
	if len(p) != 1 || p[0].App != "podinfo" || p[0].File != "sources/podinfo/" || !strings.Contains(p[0].String(), second) {
		t.Fatalf("check of an edited copy: %v", p)
	}
	res = vendor(t, root, []gitsource.Spec{s}, opts)
	if res[0].Action != "restored" || read(t, cm) != pinned {
		t.Fatalf("vendor of an edited copy: %+v", res)
	}

	// The application's ref changes without a render: the lock is stale.
	s2 := s
	s2.Ref = gitsource.Ref{Tag: "v1"}
	if p := staleProblems(t, root, []gitsource.Spec{s2}); len(p) != 1 || !strings.Contains(p[0].Why, "tag v1") {
		t.Fatalf("check of a changed spec: %v", p)
	}

	// The application goes: its copy and lock are leftovers.
	if p := staleProblems(t, root, nil); len(p) != 2 {
		t.Fatalf("check without the application: %v", p)
	}
	vendor(t, root, nil, opts)
	if entries, _ := os.ReadDir(filepath.Join(root, "sources")); len(entries) != 0 {
		t.Fatalf("sources/ keeps %v", entries)
	}
}

func TestVendorPinnedCommitAndCredentials(t *testing.T) {
	srv, _ := upstream(t)
	first := srv.Head("podinfo", "main")
	srv.Commit(t, "podinfo", gitserver.Maintainer, map[string]string{"deploy/cm.yaml": "kind: ConfigMap\n"}, nil, "later")
	root := t.TempDir()
	// Credentials in the URL (as a user might pass them on the command
	// line) are used but never written or shown.
	s := spec(srv)
	s.URL = srv.UserURL("podinfo", gitserver.Maintainer)
	s.Ref = gitsource.Ref{Commit: first}
	res := vendor(t, root, []gitsource.Spec{s}, gitsource.Options{})
	if res[0].Commit != first || !strings.Contains(read(t, filepath.Join(root, "sources/podinfo/cm.yaml")), "version: one") {
		t.Fatalf("vendor of a pinned commit: %+v", res)
	}
	pw := srv.Password(gitserver.Maintainer)
	if lock := read(t, filepath.Join(root, "sources/podinfo.lock.yaml")); strings.Contains(lock, pw) || strings.Contains(res[0].URL, pw) {
		t.Fatalf("the password reached the lock or the result:\n%s", lock)
	}
	s.Path = "missing"
	_, err := gitsource.Vendor(context.Background(), root, []gitsource.Spec{s}, gitsource.Options{})
	if !errors.Is(err, gitrepo.ErrPathNotFound) || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "application podinfo") {
		t.Fatalf("err = %v", err)
	}
	// Without credentials the forge refuses: a classified error.
	s = spec(srv)
	_, err = gitsource.Vendor(context.Background(), t.TempDir(), []gitsource.Spec{s}, gitsource.Options{})
	if !errors.Is(err, gitrepo.ErrAuth) {
		t.Fatalf("anonymous: %v, want ErrAuth", err)
	}
}

func TestVendorRefusesAHostileSource(t *testing.T) {
	srv, auth := upstream(t)
	// A branch whose deploy/ links out of the vendored tree into the fleet
	// repo's clusters/ — and one with a file the agent would never read.
	work := t.TempDir()
	treefile.Write(t, work, map[string]string{"deploy/kustomization.yaml": "resources: [secret.yaml]\n", "deploy/big.yaml": strings.Repeat("#", 64)})
	if err := os.Symlink("../../../clusters/member1.yaml", filepath.Join(work, "deploy", "secret.yaml")); err != nil {
		t.Fatal(err)
	}
	gitserver.Git(t, work, "init", "-q", "-b", "evil")
	gitserver.Git(t, work, "add", "-A")
	gitserver.Git(t, work, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", "evil")
	gitserver.Git(t, srv.RepoPath("podinfo"), "fetch", "-q", work, "evil:refs/heads/evil")

	root := t.TempDir()
	s := spec(srv)
	s.Ref = gitsource.Ref{Branch: "evil"}
	_, err := gitsource.Vendor(context.Background(), root, []gitsource.Spec{s}, gitsource.Options{Auth: auth})
	if !errors.Is(err, gitrepo.ErrUnsafePath) || !strings.Contains(err.Error(), "secret.yaml") {
		t.Fatalf("symlink out: %v, want ErrUnsafePath naming secret.yaml", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "sources")); len(entries) != 0 {
		t.Fatalf("a refused source left %v", entries)
	}
	if err := os.Remove(filepath.Join(work, "deploy", "secret.yaml")); err != nil {
		t.Fatal(err)
	}
	gitserver.Git(t, work, "add", "-A")
	gitserver.Git(t, work, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", "big only")
	gitserver.Git(t, srv.RepoPath("podinfo"), "fetch", "-q", work, "+evil:refs/heads/evil")
	_, err = gitsource.Vendor(context.Background(), root, []gitsource.Spec{s}, gitsource.Options{Auth: auth, Limits: gitrepo.TreeLimits{MaxFileSize: 32}})
	if !errors.Is(err, gitrepo.ErrTooLarge) || !strings.Contains(err.Error(), "big.yaml") {
		t.Fatalf("oversized: %v, want ErrTooLarge naming big.yaml", err)
	}
}
