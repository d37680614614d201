package cmd

import (
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/cijob"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

func TestMain(m *testing.M) {
	cijob.ServeCLIIfRequested(Execute)
	os.Exit(m.Run())
}

// TestTemplatePublishCI runs the shell of the template's publish jobs
// (GitHub Actions and GitLab CI) as written there, each time in a fresh
// shallow clone as CI has, against the real Git smart-HTTP server: the
// first run creates one slice ref per cluster naming main's head; after a
// merge each slice commit is a child of the cluster's last (so agents fetch
// only what changed) and names the new head; a run with nothing merged
// moves no ref.
func TestTemplatePublishCI(t *testing.T) {
	clusters := []string{"edge-1", "member1", "member2"}
	srv := gitserver.Start(t, gitserver.ForgeConfig())
	const token = "publish-token"
	// GitLab's project access token and GitHub's job token.
	for _, user := range []string{"oauth2", "x-access-token"} {
		if err := srv.AddUser(user, token, gitserver.Rule{User: user, Refs: []string{gitrepo.SliceRefPrefix + "*"}, Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	host, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_, cliEnv := cijob.CLIOnPath(t, "flotilla")

	cases := []struct {
		file   string
		script func(t *testing.T, doc map[string]any) string
		env    func(repo string) []string
	}{
		{".github/workflows/flotilla-publish.yml", githubStep("publish", "Publish slices"), func(string) []string { return []string{"GIT_TOKEN=" + token} }},
		{".gitlab/flotilla-publish.yml", gitlabScript("flotilla-publish"), func(repo string) []string {
			return []string{"CI_SERVER_PROTOCOL=http", "CI_SERVER_HOST=" + host, "CI_SERVER_PORT=" + port,
				"CI_PROJECT_PATH=" + repo, "CI_DEFAULT_BRANCH=main", "FLOTILLA_PUBLISH_TOKEN=" + token}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(templateDir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Fatalf("%s: %v", tc.file, err)
			}
			script := tc.script(t, doc)
			if lines := ciCommandLines(script); len(lines) != 1 || !strings.HasPrefix(lines[0], "flotilla publish ") {
				t.Fatalf("%s runs %q, want one flotilla publish", tc.file, lines)
			}
			repo := "fleet-" + string(rune('a'+i))
			srv.MustCreateRepo(t, repo, templateDir)
			env := append(append(os.Environ(), cliEnv...),
				"HOME="+t.TempDir(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
			env = append(env, tc.env(repo)...)
			publish := func() map[string]string {
				t.Helper()
				clone := filepath.Join(t.TempDir(), "clone")
				runIn(t, "", env, "git", "clone", "-q", "--depth", "1", "--branch", "main", srv.UserURL(repo, gitserver.Maintainer), clone)
				runIn(t, clone, env, "bash", "-e", "-c", script)
				return sliceRefs(t, srv, repo, clusters)
			}

			first := publish()
			if len(first) != len(clusters) {
				t.Fatalf("the first publish created slice refs %v, want one for each of %v", first, clusters)
			}
			head := srv.Head(repo, "main")
			for _, c := range clusters {
				if src := sliceSource(t, srv, repo, first[c]); src != head {
					t.Errorf("%s: the first slice names main commit %s, want the head %s", c, src, head)
				}
			}

			file := path.Join(slice.ClusterDir("member1"), "mysql-db", "values.yaml")
			old, err := os.ReadFile(filepath.Join(templateDir, filepath.FromSlash(file)))
			if err != nil {
				t.Fatal(err)
			}
			merged := srv.Commit(t, repo, gitserver.Maintainer, map[string]string{file: string(old) + "# a merged change\n"}, nil, "a change to member1")
			second := publish()
			for _, c := range clusters {
				if second[c] == first[c] {
					t.Errorf("%s: the slice ref did not move after the merge", c)
					continue
				}
				if parent := gitIn(t, srv.RepoPath(repo), "rev-parse", second[c]+"^"); parent != first[c] {
					t.Errorf("%s: the new slice commit's parent is %s, want the last slice %s", c, parent, first[c])
				}
				if src := sliceSource(t, srv, repo, second[c]); src != merged {
					t.Errorf("%s: the slice names main commit %s, want the merge %s", c, src, merged)
				}
			}

			if third := publish(); !maps.Equal(third, second) {
				t.Errorf("publishing with nothing merged moved slice refs: %v → %v", second, third)
			}

			// A cluster leaves the fleet: its slice ref is deleted.
			srv.Commit(t, repo, gitserver.Maintainer, nil, []string{slice.ClusterDir("member2")}, "member2 leaves")
			fourth := publish()
			if _, ok := fourth["member2"]; ok {
				t.Errorf("the slice ref of member2, which left, is still published: %v", fourth)
			}
			if fourth["member1"] == second["member1"] {
				t.Errorf("member1's slice did not move to the new head: %v", fourth)
			}
		})
	}
}

// githubStep returns the run script of a GitHub Actions job's named step.
func githubStep(job, step string) func(*testing.T, map[string]any) string {
	return func(t *testing.T, doc map[string]any) string {
		t.Helper()
		run, err := cijob.GitHubStep(doc, job, step)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
}

// gitlabScript returns a GitLab CI job's script lines as one shell script.
func gitlabScript(job string) func(*testing.T, map[string]any) string {
	return func(t *testing.T, doc map[string]any) string {
		t.Helper()
		script, err := cijob.GitLabScript(doc, job)
		if err != nil {
			t.Fatal(err)
		}
		return script
	}
}

func runIn(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func gitIn(t *testing.T, gitDir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir=" + gitDir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// sliceRefs reads the slice refs of clusters on the server, those it has.
func sliceRefs(t *testing.T, srv *gitserver.Server, repo string, clusters []string) map[string]string {
	t.Helper()
	refs, err := srv.Refs(repo)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range clusters {
		if h, ok := refs[gitrepo.SliceRef(c)]; ok {
			out[c] = h
		}
	}
	return out
}

// sliceSource is the main commit a slice commit names.
func sliceSource(t *testing.T, srv *gitserver.Server, repo, commit string) string {
	t.Helper()
	return gitIn(t, srv.RepoPath(repo), "log", "-1", "--format=%(trailers:key="+gitrepo.SliceSourceTrailer+",valueonly)", commit)
}

// ciCommandLines are the lines of a job script that run flotilla.
func ciCommandLines(script string) []string {
	var out []string
	for _, line := range strings.Split(script, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "flotilla ") {
			out = append(out, line)
		}
	}
	return out
}
