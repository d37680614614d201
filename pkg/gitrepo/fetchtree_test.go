package gitrepo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// sourceRepo serves a second repository, "src", whose main holds files,
// an executable, a symlink inside deploy/ and an annotated tag v1.
func sourceRepo(t *testing.T) (*gitserver.Server, gitrepo.Auth, string) {
	t.Helper()
	srv := gitserver.Start(t, gitserver.ForgeConfig())
	dir := writeDir(t, map[string]string{
		"deploy/kustomization.yaml": "resources: [cm.yaml]\n",
		"deploy/cm.yaml":            "kind: ConfigMap\n",
		"deploy/sub/x.yaml":         "x: 1\n",
		"other/ignored.yaml":        "y: 1\n",
	})
	if err := os.WriteFile(filepath.Join(dir, "deploy", "hook.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../cm.yaml", filepath.Join(dir, "deploy", "sub", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	srv.MustCreateRepo(t, "src", dir)
	git(t, srv.RepoPath("src"), "tag", "-a", "-m", "release", "v1", "main")
	return srv, userAuth(srv, gitserver.Maintainer), srv.URL("src")
}

func TestFetchTreeVendorsASubtreeAtACommit(t *testing.T) {
	ctx := context.Background()
	srv, auth, url := sourceRepo(t)
	head := srv.Head("src", "main")

	for _, ref := range []gitrepo.TreeRef{{Branch: "main"}, {Tag: "v1"}, {Commit: head}} {
		got, err := gitrepo.ResolveRef(ctx, url, auth, 0, ref)
		if err != nil || got != head {
			t.Fatalf("ResolveRef(%s) = %q, %v; want %s", ref, got, err, head)
		}
	}
	dest := filepath.Join(t.TempDir(), "out")
	res, err := gitrepo.FetchTree(ctx, gitrepo.TreeRequest{URL: url, Auth: auth, Commit: head, Path: "deploy", Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	files := readDir(t, dest)
	want := map[string]string{"kustomization.yaml": "resources: [cm.yaml]\n", "cm.yaml": "kind: ConfigMap\n", "sub/x.yaml": "x: 1\n", "hook.sh": "#!/bin/sh\n"}
	if !equalFiles(files, want) {
		t.Fatalf("vendored files = %v, want %v", files, want)
	}
	if target, err := os.Readlink(filepath.Join(dest, "sub", "link.yaml")); err != nil || target != "../cm.yaml" {
		t.Fatalf("symlink inside the tree: %q, %v", target, err)
	}
	if fi, err := os.Stat(filepath.Join(dest, "hook.sh")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("hook.sh lost its executable bit: %v", err)
	}
	// The tree hash is Git's own, and the copy on disk hashes to it.
	if gitTree := git(t, srv.RepoPath("src"), "rev-parse", head+":deploy"); res.Tree != gitTree {
		t.Fatalf("Tree = %s, git says %s", res.Tree, gitTree)
	}
	if h, err := gitrepo.DirTreeHash(dest); err != nil || h != res.Tree {
		t.Fatalf("DirTreeHash = %s, %v; want %s", h, err, res.Tree)
	}
	if res.Files != 5 {
		t.Errorf("Files = %d, want 5", res.Files)
	}

	// An edit, a new empty directory (Git ignores it) and a mode change.
	if err := os.Mkdir(filepath.Join(dest, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if h, _ := gitrepo.DirTreeHash(dest); h != res.Tree {
		t.Fatalf("an empty directory changed the tree hash")
	}
	if err := os.Chmod(filepath.Join(dest, "hook.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	if h, _ := gitrepo.DirTreeHash(dest); h == res.Tree {
		t.Fatalf("a lost executable bit did not change the tree hash")
	}
}

func TestFetchTreeErrors(t *testing.T) {
	ctx := context.Background()
	srv, auth, url := sourceRepo(t)
	head := srv.Head("src", "main")
	cases := []struct {
		name string
		run  func() error
		want error
	}{
		{"missing branch", func() error {
			_, err := gitrepo.ResolveRef(ctx, url, auth, 0, gitrepo.TreeRef{Branch: "nope"})
			return err
		}, gitrepo.ErrRefNotFound},
		{"missing tag", func() error {
			_, err := gitrepo.ResolveRef(ctx, url, auth, 0, gitrepo.TreeRef{Tag: "v9"})
			return err
		}, gitrepo.ErrRefNotFound},
		{"wrong password", func() error {
			_, err := gitrepo.ResolveRef(ctx, url, gitrepo.Auth{Username: gitserver.Maintainer, Password: "wrong"}, 0, gitrepo.TreeRef{Branch: "main"})
			return err
		}, gitrepo.ErrAuth},
		{"missing path", func() error {
			_, err := gitrepo.FetchTree(ctx, gitrepo.TreeRequest{URL: url, Auth: auth, Commit: head, Path: "nope", Dest: t.TempDir()})
			return err
		}, gitrepo.ErrPathNotFound},
		{"unknown commit", func() error {
			_, err := gitrepo.FetchTree(ctx, gitrepo.TreeRequest{URL: url, Auth: auth, Commit: strings.Repeat("ab", 20), Dest: t.TempDir()})
			return err
		}, nil},
		{"short commit", func() error {
			_, err := gitrepo.ResolveRef(ctx, url, auth, 0, gitrepo.TreeRef{Commit: head[:12]})
			return err
		}, gitrepo.ErrRevisionNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), srv.Password(gitserver.Maintainer)) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// hostileBranch stores a commit made by make in the server's repo and
// points branch at it, as a forge that does not fsck pushes would serve it.
func hostileBranch(t *testing.T, srv *gitserver.Server, branch string, make func(dir string) string) string {
	t.Helper()
	bare := srv.RepoPath("src")
	hash := make(bare)
	git(t, bare, "update-ref", "refs/heads/"+branch, hash)
	return hash
}

func TestFetchTreeRefusesHostileTrees(t *testing.T) {
	ctx := context.Background()
	srv, auth, url := sourceRepo(t)
	small := gitrepo.TreeLimits{MaxFileSize: 64, MaxFiles: 3, MaxTotalSize: 100}
	cases := []struct {
		name   string
		files  map[string]string // a repository built with the git CLI
		link   [2]string         // a symlink in it: name, target
		hash   func(dir string) string
		limits gitrepo.TreeLimits
		want   error
	}{
		{name: "dot-dot entry", hash: func(dir string) string { return hostileCommit(t, dir, "..") }, want: gitrepo.ErrUnsafePath},
		{name: ".git entry", hash: func(dir string) string { return hostileCommit(t, dir, ".git") }, want: gitrepo.ErrUnsafePath},
		{name: "symlink up and out", files: map[string]string{"a.yaml": "a\n"}, link: [2]string{"sub/out.yaml", "../../etc/passwd"}, want: gitrepo.ErrUnsafePath},
		{name: "absolute symlink", files: map[string]string{"a.yaml": "a\n"}, link: [2]string{"out.yaml", "/etc/passwd"}, want: gitrepo.ErrUnsafePath},
		{name: "oversized file", files: map[string]string{"big.yaml": strings.Repeat("x", 65)}, limits: small, want: gitrepo.ErrTooLarge},
		{name: "too many files", files: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}, limits: small, want: gitrepo.ErrTooLarge},
		{name: "too many bytes", files: map[string]string{"a": strings.Repeat("1", 60), "b": strings.Repeat("2", 60)}, limits: small, want: gitrepo.ErrTooLarge},
		{name: "pack too large", files: map[string]string{"a": strings.Repeat("random-ish data ", 4096)}, limits: gitrepo.TreeLimits{MaxFetchSize: 256}, want: gitrepo.ErrTooLarge},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			branch := "hostile-" + string(rune('a'+i))
			var hash string
			if tc.hash != nil {
				hash = hostileBranch(t, srv, branch, tc.hash)
			} else {
				hash = pushTree(t, srv, branch, tc.files, tc.link)
			}
			got, err := gitrepo.ResolveRef(ctx, url, auth, 0, gitrepo.TreeRef{Branch: branch})
			if err != nil || got != hash {
				t.Fatalf("ResolveRef = %s, %v; want %s", got, err, hash)
			}
			base := t.TempDir()
			dest := filepath.Join(base, "out")
			_, err = gitrepo.FetchTree(ctx, gitrepo.TreeRequest{URL: url, Auth: auth, Commit: hash, Dest: dest, Limits: tc.limits})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if entries, _ := os.ReadDir(dest); len(entries) != 0 {
				t.Fatalf("the refused tree left %d entries in the destination", len(entries))
			}
			if entries, _ := os.ReadDir(base); len(entries) != 1 {
				t.Fatalf("something was written beside the destination: %v", entries)
			}
		})
	}
}

// pushTree commits files (and a symlink) as the whole tree of a new
// branch of "src", with the git CLI.
func pushTree(t *testing.T, srv *gitserver.Server, branch string, files map[string]string, link [2]string) string {
	t.Helper()
	dir := writeDir(t, files)
	if link[0] != "" {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, link[0])), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(link[1], filepath.Join(dir, link[0])); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q", "-b", branch)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "tree")
	// Fetched into the server's repository: no hook judges a fetch.
	git(t, srv.RepoPath("src"), "fetch", "-q", dir, branch+":refs/heads/"+branch)
	return srv.Head("src", branch)
}

// TestFetchTreeTimeout: a server slower than the timeout is an outage,
// classified, for both calls that touch the network.
func TestFetchTreeTimeout(t *testing.T) {
	ctx := context.Background()
	srv, auth, url := sourceRepo(t)
	head := srv.Head("src", "main")
	srv.SetDelay(5 * time.Second)
	if _, err := gitrepo.ResolveRef(ctx, url, auth, 200*time.Millisecond, gitrepo.TreeRef{Branch: "main"}); !errors.Is(err, gitrepo.ErrUnreachable) {
		t.Fatalf("ResolveRef: %v, want ErrUnreachable", err)
	}
	_, err := gitrepo.FetchTree(ctx, gitrepo.TreeRequest{URL: url, Auth: auth, Timeout: 200 * time.Millisecond, Commit: head, Dest: t.TempDir()})
	if !errors.Is(err, gitrepo.ErrUnreachable) {
		t.Fatalf("FetchTree: %v, want ErrUnreachable", err)
	}
}
