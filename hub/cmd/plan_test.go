package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/hub/plan"
	"github.com/flotilla-gitops/flotilla/test/gitea"
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

	// Valid inputs, but a unit that does not render at head (its
	// kustomization names a missing file): exit 2, and the plan is still
	// printed with the unit's error, as the agent would fail on it.
	if err := os.WriteFile(app, data, 0o644); err != nil {
		t.Fatal(err)
	}
	kust := filepath.Join(dir, "apps", "nginx", "base", "kustomization.yaml")
	kdata, err := os.ReadFile(kust)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(kdata), "  - service.yaml\n", "  - service.yaml\n  - missing.yaml\n", 1)
	if broken == string(kdata) {
		t.Fatal("the template's nginx kustomization changed: update the test")
	}
	if err := os.WriteFile(kust, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = planCLI(t, "plan", "--repo", dir, "--base", "main", "-o", "json")
	if code != ExitError {
		t.Errorf("a unit failing at head: exit %d, want %d\n%s", code, ExitError, stderr)
	}
	p = plan.Plan{}
	if err := json.Unmarshal([]byte(out), &p); err != nil || !p.Failed {
		t.Fatalf("a unit failing at head: failed %v, %v\n%s", p.Failed, err, out)
	}
	failed := 0
	for _, c := range p.Clusters {
		for _, u := range c.Units {
			if u.Name == "nginx" && strings.Contains(u.Error, "missing.yaml") {
				failed++
			}
		}
	}
	if failed == 0 {
		t.Errorf("no nginx unit with the render error in the plan: %+v", p.Summary)
	}
	if err := os.WriteFile(kust, kdata, 0o644); err != nil {
		t.Fatal(err)
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

// TestTemplateCIRunsThePlan runs the flotilla commands of the template's CI
// definitions, as written there, on a pull request of the template (the
// CI variables replaced by what they hold on a forge): validate and
// render --check pass, plan exits 1 (changes, which the scripts do not
// treat as a failure) and writes the Markdown the scripts post, which
// starts with the marker they find their previous comment by.
func TestTemplateCIRunsThePlan(t *testing.T) {
	dir := planTemplateRepo(t)
	// A forge's checkout has the target branch as a remote branch.
	planGit(t, dir, "update-ref", "refs/remotes/origin/main", "main")
	out, err := exec.Command("git", "-C", dir, "rev-parse", "main").Output()
	if err != nil {
		t.Fatal(err)
	}
	mainSHA := strings.TrimSpace(string(out))
	t.Chdir(dir) // CI runs in the checkout

	for _, ci := range []struct {
		file string
		vars map[string]string
	}{
		{".github/workflows/flotilla.yml", map[string]string{"${{ github.base_ref }}": "main"}},
		{".gitlab-ci.yml", map[string]string{"${CI_MERGE_REQUEST_DIFF_BASE_SHA}": mainSHA}},
	} {
		t.Run(ci.file, func(t *testing.T) {
			data, err := os.ReadFile(ci.file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), "'"+plan.MarkdownMarker+"'") {
				t.Errorf("%s does not look for its previous comment by the marker %q", ci.file, plan.MarkdownMarker)
			}
			var doc any
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Fatalf("%s: %v", ci.file, err)
			}
			var ran []string
			for _, line := range ciCommandLines(doc) {
				args := ciArgs(t, line, ci.vars)
				os.Remove("plan.md")
				stdout, stderr, code := planCLI(t, args[1:]...)
				want := ExitOK
				if args[1] == "plan" {
					want = ExitChanges
				}
				if code != want {
					t.Fatalf("%s: exit %d, want %d\n%s%s", line, code, want, stdout, stderr)
				}
				if i := slices.Index(args, "--markdown-file"); i > 0 {
					md, err := os.ReadFile(args[i+1])
					if err != nil || !strings.HasPrefix(string(md), plan.MarkdownMarker) || len(md) > plan.DefaultMaxBytes ||
						!strings.Contains(string(md), "nginx: member1 3→2 replicas, member2 1→2") {
						t.Errorf("%s: the comment (%v):\n%s", line, err, md)
					}
				}
				ran = append(ran, strings.Join(args[1:min(3, len(args))], " "))
			}
			for _, want := range []string{"validate", "render --check", "plan --base"} {
				if !slices.Contains(ran, want) {
					t.Errorf("%s runs %q, not flotilla %s", ci.file, ran, want)
				}
			}
		})
	}
}

// ciCommandLines are the shell lines of a CI definition that run flotilla,
// wherever they are (GitHub steps' run, GitLab script entries).
func ciCommandLines(node any) []string {
	var out []string
	switch n := node.(type) {
	case string:
		for _, line := range strings.Split(n, "\n") {
			if line = strings.TrimSpace(line); strings.HasPrefix(line, "flotilla ") {
				out = append(out, line)
			}
		}
	case []any:
		for _, v := range n {
			out = append(out, ciCommandLines(v)...)
		}
	case map[string]any:
		keys := make([]string, 0, len(n))
		for k := range n {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, ciCommandLines(n[k])...)
		}
	}
	return out
}

// ciArgs splits a CI shell line into arguments after replacing the CI
// variables; a variable the test does not know fails it.
func ciArgs(t *testing.T, line string, vars map[string]string) []string {
	t.Helper()
	s := line
	for k, v := range vars {
		s = strings.ReplaceAll(s, k, v)
	}
	if strings.ContainsAny(s, "$`|;&<>") {
		t.Fatalf("%q: unknown CI variable or shell syntax", line)
	}
	args := strings.Fields(s)
	for i, a := range args {
		args[i] = strings.Trim(a, `"'`)
	}
	return args
}

// TestPlanCommentsOnGitea: plan --comment-on posts the Markdown plan on a
// real Gitea pull request, and a second run edits that comment.
func TestPlanCommentsOnGitea(t *testing.T) {
	dir := planTemplateRepo(t)
	srv := gitea.Start(t)
	ctx := context.Background()
	srv.CreateRepo(t, "fleet")
	for _, branch := range []string{"main", "feature"} {
		srv.Commit(t, "fleet", branch, map[string]string{"README.md": branch + "\n"}, branch)
	}
	pr := srv.CreatePull(t, "fleet", "feature", "main")
	t.Setenv("FLOTILLA_FORGE_TOKEN", srv.Token)
	args := []string{"plan", "--repo", dir, "--base", "main", "--head", "feature", "--comment-on", strconv.Itoa(pr),
		"--forge", "gitea", "--forge-url", srv.URL, "--forge-repo", srv.Repo("fleet")}
	for range 2 {
		if _, stderr, code := planCLI(t, args...); code != ExitChanges || !strings.Contains(stderr, "plan comment") {
			t.Fatalf("plan --comment-on: exit %d\n%s", code, stderr)
		}
	}
	var comments []struct{ Body string }
	if err := srv.API(ctx, http.MethodGet, fmt.Sprintf("/api/v1/repos/%s/issues/%d/comments", srv.Repo("fleet"), pr), nil, &comments); err != nil {
		t.Fatal(err)
	}
	if len(comments) != 1 || !strings.HasPrefix(comments[0].Body, plan.MarkdownMarker) || !strings.Contains(comments[0].Body, "nginx") {
		t.Fatalf("comments on #%d after two runs: %+v, want the one plan", pr, comments)
	}
}
