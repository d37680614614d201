package gitrepo_test

import (
	"context"
	"os"
	"path/filepath"
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

// git runs the git CLI (gitserver.Git) as a fixed author and committer.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return gitserver.Git(t, dir, append(testIdentity, args...)...)
}

func gitErr(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	return gitserver.GitErr(t, dir, append(testIdentity, args...)...)
}

var testIdentity = []string{"-c", "user.name=t", "-c", "user.email=t@example.invalid"}

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
