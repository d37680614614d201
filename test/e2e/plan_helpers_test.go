package e2e_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// copyDir copies a directory tree of regular files.
func planCopyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// gitCLI runs git in dir with a fixed identity and dates, so commit hashes
// are the same on every run (golden files name them).
func planGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=Fleet Maintainer", "GIT_AUTHOR_EMAIL=maintainer@example.com",
		"GIT_COMMITTER_NAME=Fleet Maintainer", "GIT_COMMITTER_EMAIL=maintainer@example.com",
		"GIT_AUTHOR_DATE=2025-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2025-01-01T00:00:00Z",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// flotillaCLI runs the hub CLI in-process and returns its output and exit
// code.
func planCLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := hubcmd.NewRootCommand()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	code = hubcmd.ExitCode(err)
	if code == hubcmd.ExitError && err != nil && errb.Len() == 0 {
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), code
}

// planWriteFiles writes files (repo-relative path → content; "" deletes).
func planWriteFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	write := map[string]string{}
	for p, content := range files {
		if content != "" {
			write[p] = content
		} else if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Fatal(err)
		}
	}
	treefile.Write(t, root, write)
}

// renderAndCommit runs `flotilla render` and commits everything.
func planRenderCommit(t testing.TB, dir, msg string) string {
	t.Helper()
	if _, stderr, code := planCLI(t, "render", "--repo", dir); code != 0 {
		t.Fatalf("flotilla render: exit %d\n%s", code, stderr)
	}
	planGit(t, dir, "add", "-A")
	planGit(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
	return planGit(t, dir, "rev-parse", "HEAD")
}

func planReadFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
