package gitrepo_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

// TestInitRepository: every file but the ignored ones lands in one commit
// on the requested branch, read back with the git CLI; a second init is
// refused; the origin remote's URL is read once it is configured.
func TestInitRepository(t *testing.T) {
	ctx := context.Background()
	dir := writeDir(t, map[string]string{
		"clusters/member1.yaml": "kind: Cluster\n",
		"README.md":             "fleet\n",
		".gitignore":            "*.tmp\n",
		"scratch.tmp":           "not committed\n",
	})
	hash, err := gitrepo.InitRepository(ctx, dir, "trunk", "Initial fleet repo", gitrepo.Signature{Name: "Ada", Email: "ada@example.invalid"})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, dir, "rev-parse", "refs/heads/trunk"); got != hash {
		t.Errorf("trunk is %s, InitRepository returned %s", got, hash)
	}
	if got := git(t, dir, "symbolic-ref", "HEAD"); got != "refs/heads/trunk" {
		t.Errorf("HEAD is %s, want refs/heads/trunk", got)
	}
	files := strings.Fields(git(t, dir, "ls-tree", "-r", "--name-only", hash))
	if want := []string{".gitignore", "README.md", "clusters/member1.yaml"}; strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("committed files %v, want %v", files, want)
	}
	if got := git(t, dir, "log", "-1", "--format=%an <%ae>|%s"); got != "Ada <ada@example.invalid>|Initial fleet repo" {
		t.Errorf("commit %q", got)
	}
	if out := git(t, dir, "status", "--porcelain"); out != "" {
		t.Errorf("work tree not clean after init:\n%s", out)
	}

	if _, err := gitrepo.InitRepository(ctx, dir, "main", "again", gitrepo.Signature{}); !errors.Is(err, gitrepo.ErrRepoExists) {
		t.Errorf("second init: %v, want ErrRepoExists", err)
	}
	if _, err := gitrepo.RemoteURL(dir, "origin"); !errors.Is(err, gitrepo.ErrRemoteNotConfigured) {
		t.Errorf("RemoteURL without origin: %v, want ErrRemoteNotConfigured", err)
	}
	git(t, dir, "remote", "add", "origin", "https://git.example.invalid/fleet.git")
	if u, err := gitrepo.RemoteURL(dir+"/clusters", "origin"); err != nil || u != "https://git.example.invalid/fleet.git" {
		t.Errorf("RemoteURL from a subdirectory = %q, %v", u, err)
	}
	if _, err := gitrepo.InitRepository(ctx, t.TempDir(), "bad..branch", "x", gitrepo.Signature{}); err == nil {
		t.Error("an invalid branch name was accepted")
	}
}
