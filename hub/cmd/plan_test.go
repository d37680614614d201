package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/plan"
)

// planCLI runs the command tree in-process and returns stdout, stderr and
// the exit code Execute would return.
func planCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := NewRootCommand()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if code := ExitCode(err); code == ExitError && err != nil {
		stderr.WriteString("error: " + err.Error() + "\n")
	}
	return stdout.String(), stderr.String(), ExitCode(err)
}

func planGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// planTemplateRepo is the fleet-repo-template in a Git repository: main as
// it is, and the branch "feature" dividing nginx 1:1 instead of 3:1.
func planTemplateRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "../../fleet-repo-template"
	err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := planCLI(t, "render", "--repo", dir); code != ExitOK {
		t.Fatalf("render: exit %d\n%s", code, stderr)
	}
	planGit(t, dir, "init", "-q", "-b", "main")
	planGit(t, dir, "add", "-A")
	planGit(t, dir, "commit", "-q", "-m", "template")
	planGit(t, dir, "checkout", "-q", "-b", "feature")
	app := filepath.Join(dir, "apps", "nginx", "app.yaml")
	data, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(app, []byte(strings.Replace(string(data), "weight: 3", "weight: 1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := planCLI(t, "render", "--repo", dir); code != ExitOK {
		t.Fatalf("render: exit %d\n%s", code, stderr)
	}
	planGit(t, dir, "commit", "-q", "-am", "nginx 1:1")
	return dir
}

func TestPlanCommandExitCodesAndFormats(t *testing.T) {
	dir := planTemplateRepo(t)

	out, _, code := planCLI(t, "plan", "--repo", dir, "--base", "main", "--head", "main")
	if code != ExitOK || !strings.Contains(out, "No changes") {
		t.Errorf("no change: exit %d\n%s", code, out)
	}

	md := filepath.Join(t.TempDir(), "plan.md")
	out, stderr, code := planCLI(t, "plan", "--repo", dir, "--base", "main", "--head", "feature", "--markdown-file", md)
	if code != ExitChanges {
		t.Fatalf("a change: exit %d\n%s", code, stderr)
	}
	if strings.Contains(out, "\x1b[") || !strings.Contains(out, "nginx: member1 3→2 replicas, member2 1→2") {
		t.Errorf("text (not a terminal, so no colour):\n%s", out)
	}
	if b, err := os.ReadFile(md); err != nil || !strings.HasPrefix(string(b), plan.MarkdownMarker) {
		t.Errorf("--markdown-file: %v\n%s", err, b)
	}

	out, _, code = planCLI(t, "plan", "--repo", dir, "--base", "main", "--head", "feature", "-o", "json", "--cluster", "member2")
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil || code != ExitChanges {
		t.Fatalf("json: exit %d, %v", code, err)
	}
	if len(p.Clusters) != 1 || p.Clusters[0].Name != "member2" {
		t.Errorf("--cluster member2: %+v", p.Summary)
	}

	out, _, code = planCLI(t, "plan", "--repo", dir, "--base", "main", "--head", "feature", "-o", "markdown", "--max-bytes", "1000")
	if code != ExitChanges || len(out) > 1000 || !strings.Contains(out, "Plan truncated") {
		t.Errorf("--max-bytes 1000: exit %d, %d bytes", code, len(out))
	}

	// The working tree (the default head) with an invalid application:
	// exit 2, the problem named by file and line.
	app := filepath.Join(dir, "apps", "nginx", "app.yaml")
	data, _ := os.ReadFile(app)
	if err := os.WriteFile(app, append(data, []byte("  bogus: true\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = planCLI(t, "plan", "--repo", dir, "--base", "main")
	if code != ExitError || !strings.Contains(stderr, "apps/nginx/app.yaml:") {
		t.Errorf("invalid head: exit %d\n%s", code, stderr)
	}

	for _, args := range [][]string{
		{"plan", "--repo", dir},                                     // no --base
		{"plan", "--repo", dir, "--base", "main", "-o", "yaml"},     // unknown format
		{"plan", "--repo", dir, "--base", "no-such-branch"},         // unknown revision
		{"plan", "--repo", dir, "--base", "main", "--cluster", "x"}, // unknown cluster
	} {
		if _, stderr, code := planCLI(t, args...); code != ExitError {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, ExitError, stderr)
		}
	}
}
