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
	"strconv"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/plan"
	"github.com/flotilla-gitops/flotilla/test/cijob"
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

// TestTemplateCIRunsThePlan runs the template's checks as written, with
// bash and this checkout's CLI on PATH, on a pull request of the template:
// the GitHub workflow's validate and render --check steps, and the GitLab
// job's whole script without a token (the plan in the log and plan.md,
// which starts with the marker the sticky note is found by). The GitHub
// Plan step, which talks to the forge, runs against a real Gitea in
// TestTemplatePlanJobOnGitea.
func TestTemplateCIRunsThePlan(t *testing.T) {
	dir := planTemplateRepo(t)
	// A forge's checkout has the target branch as a remote branch.
	planGit(t, dir, "update-ref", "refs/remotes/origin/main", "main")
	out, err := exec.Command("git", "-C", dir, "rev-parse", "main").Output()
	if err != nil {
		t.Fatal(err)
	}
	mainSHA := strings.TrimSpace(string(out))
	_, cliEnv := cijob.CLIOnPath(t, "flotilla")
	env := append(os.Environ(), cliEnv...)
	ctx := context.Background()

	gh, err := cijob.Load(filepath.Join(templateDir, ".github/workflows/flotilla.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"Validate the fleet repo", "rendered/ is up to date"} {
		script, err := cijob.GitHubStep(gh, "plan", step)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := cijob.Run(ctx, dir, script, append(env, cijob.GitHubEnv(gh)...)); err != nil {
			t.Errorf("GitHub step %q: %v\n%s", step, err, out)
		}
	}

	gl, err := cijob.Load(filepath.Join(templateDir, ".gitlab-ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := cijob.GitLabScript(gl, "flotilla")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--comment-on \"$CI_MERGE_REQUEST_IID\"", "--status-on \"$CI_COMMIT_SHA\"", "--forge gitlab"} {
		if !strings.Contains(script, want) {
			t.Errorf("the GitLab job does not pass %s to plan", want)
		}
	}
	glEnv := append(append(env, cijob.GitLabVariables(gl, "flotilla")...), "CI_MERGE_REQUEST_DIFF_BASE_SHA="+mainSHA, "FLOTILLA_GITLAB_TOKEN=")
	out2, err := cijob.Run(ctx, dir, script, glEnv)
	if err != nil || !strings.Contains(out2, "nginx: member1 3→2 replicas, member2 1→2") {
		t.Fatalf("the GitLab job: %v\n%s", err, out2)
	}
	md, err := os.ReadFile(filepath.Join(dir, "plan.md"))
	if err != nil || !strings.HasPrefix(string(md), plan.MarkdownMarker) || !strings.Contains(string(md), "nginx: member1 3→2 replicas, member2 1→2") {
		t.Errorf("the GitLab job's plan.md (%v):\n%s", err, md)
	}
}

// TestTemplatePlanJobOnGitea runs the template's GitHub plan job as Gitea
// Actions would run it (FLOTILLA_FORGE=gitea, GITHUB_SERVER_URL Gitea's),
// step by step as written, the CLI on PATH, against a real Gitea whose
// main requires the status flotilla/plan: a pull request whose plan
// passes gets the plan comment (edited, not repeated, by a second run) and
// a success status and merges; one whose fleet repo does not load fails
// validation, gets a comment naming the problem and a failure status, and
// Gitea refuses to merge it.
func TestTemplatePlanJobOnGitea(t *testing.T) {
	dir := planTemplateRepo(t)
	planGit(t, dir, "checkout", "-q", "-b", "broken", "main")
	editFile(t, filepath.Join(dir, "apps", "nginx", "app.yaml"), "spec:\n", "spec:\n  replica: 3\n")
	planGit(t, dir, "commit", "-q", "-am", "a typo")

	srv := gitea.Start(t)
	ctx := context.Background()
	srv.CreateRepo(t, "fleet")
	repo := srv.Repo("fleet")
	planGit(t, dir, "push", "-q", srv.GitURL("fleet"), "main", "feature", "broken")
	if err := srv.API(ctx, http.MethodPost, "/api/v1/repos/"+repo+"/branch_protections", map[string]any{
		"rule_name": "main", "enable_status_check": true, "status_check_contexts": []string{PlanStatusContext},
	}, nil); err != nil {
		t.Fatal(err)
	}
	doc, err := cijob.Load(filepath.Join(templateDir, ".github/workflows/flotilla.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if step := stepNamed(cijob.GitHubSteps(doc, "plan"), "Plan"); step["if"] != "${{ !cancelled() }}" {
		t.Errorf("the Plan step runs if %v, want after a failed validation too", step["if"])
	}
	_, cliEnv := cijob.CLIOnPath(t, "flotilla")

	for _, tc := range []struct {
		branch       string
		validates    bool
		exit         string
		state        string
		comment      string
		edit, edited string // the second push
	}{
		{"feature", true, "1", "success", "+  replicas: 3", "replicas: 4", "replicas: 6"},
		{"broken", false, "2", "failure", "spec.replicaz", "replica: 3", "replicaz: 3"},
	} {
		t.Run(tc.branch, func(t *testing.T) {
			pr := srv.CreatePull(t, "fleet", tc.branch, "main")
			clone := filepath.Join(t.TempDir(), "clone")
			planGit(t, "", "clone", "-q", "--branch", tc.branch, srv.GitURL("fleet"), clone)
			runner := t.TempDir()
			env := append(append(os.Environ(), cliEnv...), cijob.GitHubEnv(doc)...)
			env = append(env, "FLOTILLA_FORGE=gitea", "GITHUB_SERVER_URL="+srv.URL, "GITHUB_REPOSITORY="+repo,
				"GITHUB_OUTPUT="+filepath.Join(runner, "output"), "GITHUB_STEP_SUMMARY="+filepath.Join(runner, "summary"))
			validate, err := cijob.GitHubStep(doc, "plan", "Validate the fleet repo")
			if err != nil {
				t.Fatal(err)
			}
			script, err := cijob.GitHubStep(doc, "plan", "Plan")
			if err != nil {
				t.Fatal(err)
			}
			// job runs validate and Plan on the branch's head, as a push
			// to the pull request does, and returns the head and the
			// pull request's comments.
			job := func() (string, []string) {
				t.Helper()
				out, err := exec.Command("git", "-C", clone, "rev-parse", "HEAD").Output()
				if err != nil {
					t.Fatal(err)
				}
				head := strings.TrimSpace(string(out))
				if out, err := cijob.Run(ctx, clone, validate, env); (err == nil) != tc.validates {
					t.Fatalf("validate: %v, want passing %v\n%s", err, tc.validates, out)
				}
				stepEnv, err := cijob.GitHubStepEnv(doc, "plan", "Plan", map[string]string{
					"github.token": srv.Token, "github.event.pull_request.number": strconv.Itoa(pr),
					"github.event.pull_request.head.sha": head, "github.base_ref": "main",
				})
				if err != nil {
					t.Fatal(err)
				}
				if out, err := cijob.Run(ctx, clone, script, append(env, stepEnv...)); err != nil {
					t.Fatalf("the Plan step: %v\n%s", err, out)
				}
				if got, _ := os.ReadFile(filepath.Join(runner, "output")); !strings.HasSuffix(string(got), "exit="+tc.exit+"\n") {
					t.Errorf("the Plan step's outputs %q, want exit=%s", got, tc.exit)
				}
				var comments []struct{ Body string }
				if err := srv.API(ctx, http.MethodGet, fmt.Sprintf("/api/v1/repos/%s/issues/%d/comments", repo, pr), nil, &comments); err != nil {
					t.Fatal(err)
				}
				var bodies []string
				for _, c := range comments {
					bodies = append(bodies, c.Body)
				}
				return head, bodies
			}
			_, first := job()
			// A new push to the pull request: the comment is edited.
			editFile(t, filepath.Join(clone, "apps", "nginx", "app.yaml"), tc.edit, tc.edited)
			planGit(t, clone, "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-qam", "another push")
			planGit(t, clone, "push", "-q", "origin", tc.branch)
			head, comments := job()
			if len(comments) != 1 || !strings.HasPrefix(comments[0], plan.MarkdownMarker) || !strings.Contains(comments[0], tc.comment) ||
				len(first) != 1 || first[0] == comments[0] {
				t.Errorf("comments on #%d after the first push %q, after the second %q: want one plan saying %q, edited", pr, first, comments, tc.comment)
			}
			var statuses []struct{ Context, Status string }
			if err := srv.API(ctx, http.MethodGet, "/api/v1/repos/"+repo+"/statuses/"+head, nil, &statuses); err != nil {
				t.Fatal(err)
			}
			if len(statuses) == 0 || statuses[0].Context != PlanStatusContext || statuses[0].Status != tc.state {
				t.Errorf("statuses of %s: %+v, want %s %s", head, statuses, PlanStatusContext, tc.state)
			}

			srv.WaitMergeable(t, "fleet", pr)
			err = srv.API(ctx, http.MethodPost, fmt.Sprintf("/api/v1/repos/%s/pulls/%d/merge", repo, pr), map[string]string{"Do": "merge"}, nil)
			t.Logf("merge of #%d: %v", pr, err)
			if merged := err == nil; merged != (tc.state == "success") {
				t.Errorf("merge of #%d with flotilla/plan %s: %v", pr, tc.state, err)
			}
		})
	}
}

func stepNamed(steps []map[string]any, name string) map[string]any {
	for _, s := range steps {
		if s["name"] == name {
			return s
		}
	}
	return nil
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
