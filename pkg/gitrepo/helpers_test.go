package gitrepo_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// fleet starts a forge-like server with a "fleet" repo holding files and
// returns the server and the maintainer's credentials.
func fleet(t *testing.T, files map[string]string, clusters ...string) (*gitserver.Server, gitrepo.Auth) {
	t.Helper()
	srv := gitserver.Start(t, gitserver.ForgeConfig(clusters...))
	srv.MustCreateRepo(t, "fleet", writeDir(t, files))
	return srv, userAuth(srv, gitserver.Maintainer)
}

func userAuth(srv *gitserver.Server, user string) gitrepo.Auth {
	return gitrepo.Auth{Username: user, Password: srv.Password(user)}
}

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// readDir returns the regular files under dir as path → content.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// git runs the git CLI, isolated from the user's configuration.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitErr(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}

func gitErr(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	home := filepath.Join(os.TempDir(), "flotilla-gitrepo-test-home")
	_ = os.MkdirAll(home, 0o700)
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+home, "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid",
	)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// commitMain commits files (nil content deletes) to main as the maintainer
// through a Writer: in-process, much cheaper than the git CLI helper, for
// tests that just need the branch to move.
func commitMain(t *testing.T, srv *gitserver.Server, files map[string][]byte) string {
	t.Helper()
	res, err := gitrepo.PushFiles(context.Background(), srv.URL("fleet"), "refs/heads/main", files, "change",
		gitrepo.Signature{Name: "maintainer", Email: "m@flotilla.invalid"}, gitrepo.PushOptions{Auth: userAuth(srv, gitserver.Maintainer)})
	if err != nil {
		t.Fatalf("commit to main: %v", err)
	}
	return res.Hash
}
