package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/chartrepo"
)

const templateDir = "../../fleet-repo-template"

// runCLI runs the command tree in-process and returns stdout, stderr and
// the exit code Execute would return.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runCLIStdin(t, "", args...)
}

// runCLIStdin runs the command tree in-process with standard input stdin
// and returns stdout, stderr and the exit code Execute would return.
func runCLIStdin(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	root := NewRootCommand()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	var ee exitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), ExitOK
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.code
	}
	return stdout.String(), stderr.String() + "error: " + err.Error() + "\n", ExitError
}

func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func editFile(t *testing.T, p, from, to string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), from, to, 1)
	if edited == string(data) {
		t.Fatalf("%s has no %q", p, from)
	}
	if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRenderCheckTemplate: the committed template passes --check; editing
// one application makes --check fail with exit 1, naming the files; render
// then fixes it.
func TestRenderCheckTemplate(t *testing.T) {
	repo := copyTree(t, templateDir)
	stdout, stderr, code := runCLI(t, "render", "--check", "--repo", repo)
	if code != ExitOK || !strings.Contains(stdout, "rendered/ is up to date (3 clusters, 27 units)") {
		t.Fatalf("check of the committed template: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	editFile(t, filepath.Join(repo, "apps", "iot-collector", "app.yaml"), "count: 3", "count: 5")
	stdout, stderr, code = runCLI(t, "render", "--check", "--repo", repo)
	if code != ExitChanges {
		t.Fatalf("check after an edit: exit %d, want %d\nstdout: %s\nstderr: %s", code, ExitChanges, stdout, stderr)
	}
	for _, want := range []string{
		"rendered/ is stale: 4 files differ",
		"differs  " + slice.UnitDir("member1", "iot-collector") + "/kustomization.yaml",
		"differs  " + slice.UnitDir("member2", "iot-collector") + "/kustomization.yaml",
		"differs  " + slice.SlicePath("member1"),
		"differs  " + slice.SlicePath("member2"),
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("check output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "edge-1") {
		t.Errorf("check names edge-1, which the edit does not affect:\n%s", stdout)
	}

	// JSON names the same files.
	stdout, _, code = runCLI(t, "render", "--check", "--repo", repo, "-o", "json")
	var sum renderSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || code != ExitChanges {
		t.Fatalf("json check: exit %d, %v\n%s", code, err, stdout)
	}
	if sum.UpToDate || sum.Changes == nil || len(sum.Changes.Changed) != 4 || sum.Clusters != 3 || len(sum.Charts) != 2 {
		t.Errorf("json summary = %+v", sum)
	}

	stdout, stderr, code = runCLI(t, "render", "--repo", repo)
	if code != ExitOK || !strings.Contains(stdout, "0 files added, 4 changed, 0 removed") {
		t.Fatalf("render: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, _, code = runCLI(t, "render", "--check", "--repo", repo); code != ExitOK {
		t.Fatalf("check after render: exit %d", code)
	}
}

// TestRenderInputErrors: invalid input exits 2 and prints each problem on
// its own line with file, line and field; nothing is written.
func TestRenderInputErrors(t *testing.T) {
	repo := copyTree(t, templateDir)
	editFile(t, filepath.Join(repo, "apps", "nginx", "app.yaml"), "  namespace: web\n", "  namespace: web\n  replica: 3\n")
	editFile(t, filepath.Join(repo, "apps", "backend", "app.yaml"), "fleet: dev", "fleet: devv")
	if err := os.RemoveAll(filepath.Join(repo, "rendered")); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "render", "--repo", repo)
	if code != ExitError {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, ExitError, stdout, stderr)
	}
	for _, want := range []string{
		"apps/backend/app.yaml:14: spec.syncPolicies[0].destination.fleet: reference to a missing object",
		"apps/nginx/app.yaml:10: spec.replica: unknown field",
	} {
		if !strings.Contains(stderr, want+"") {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if lines := strings.Count(stderr, "\n"); lines < 3 {
		t.Errorf("want one line per problem plus a count:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(repo, "rendered")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rendered/ was written despite the errors")
	}

	// JSON carries the same problems.
	stdout, _, code = runCLI(t, "render", "--repo", repo, "-o", "json")
	var sum renderSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || code != ExitError || len(sum.Errors) < 2 {
		t.Fatalf("json: exit %d, %v, %+v", code, err, sum)
	}
	if sum.Errors[0].File == "" || sum.Errors[0].Field == "" || sum.Errors[0].Line == 0 {
		t.Errorf("json error lacks location: %+v", sum.Errors[0])
	}
}

// TestRenderCompileError: a problem only the compiler sees (a dependency
// not deployed to the same cluster) also exits 2, naming app file and field.
func TestRenderCompileError(t *testing.T) {
	repo := copyTree(t, templateDir)
	// frontend-web depends on backend-api; send frontend-web to edge-1 too.
	editFile(t, filepath.Join(repo, "apps", "frontend-web", "app.yaml"),
		"            type: cloud\n", "            type: cloud\n    - name: edge\n      destination:\n        fleet: edge\n")
	_, stderr, code := runCLI(t, "render", "--check", "--repo", repo)
	if code != ExitError {
		t.Fatalf("exit %d, want %d\n%s", code, ExitError, stderr)
	}
	want := "apps/frontend-web/app.yaml:11: spec.dependsOn[0]: reference to a missing object: frontend-web depends on backend-api, which is not deployed to the same cluster (cluster edge-1)"
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
}

// TestRenderClusterFlag: --cluster renders only the named clusters and
// leaves the others' directories alone; an unknown name is an error.
func TestRenderClusterFlag(t *testing.T) {
	repo := copyTree(t, templateDir)
	if err := os.RemoveAll(filepath.Join(repo, filepath.FromSlash(slice.ClusterDir("member1")))); err != nil {
		t.Fatal(err)
	}
	editFile(t, filepath.Join(repo, filepath.FromSlash(slice.SlicePath("member2"))), "cluster: member2", "cluster: member2 # hand edit")
	stdout, stderr, code := runCLI(t, "render", "--repo", repo, "--cluster", "member1", "--cluster", "edge-1")
	if code != ExitOK || !strings.Contains(stdout, "rendered 2 clusters") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if _, err := slice.Read(repo, "member1"); err != nil {
		t.Errorf("member1 not rendered: %v", err)
	}
	data, _ := os.ReadFile(filepath.Join(repo, filepath.FromSlash(slice.SlicePath("member2"))))
	if !strings.Contains(string(data), "# hand edit") {
		t.Errorf("member2, outside --cluster, was rewritten")
	}
	_, stderr, code = runCLI(t, "render", "--repo", repo, "--cluster", "nope")
	if code != ExitError || !strings.Contains(stderr, `cluster "nope": unknown cluster`) {
		t.Errorf("unknown cluster: exit %d, %s", code, stderr)
	}
}

func TestValidate(t *testing.T) {
	repo := copyTree(t, templateDir)
	stdout, stderr, code := runCLI(t, "validate", "--repo", repo)
	if code != ExitOK || !strings.Contains(stdout, "fleet repo is valid: 3 clusters, 6 fleets, 8 applications") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	stdout, _, code = runCLI(t, "validate", "--repo", repo, "-o", "json")
	var sum validateSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || code != ExitOK || !sum.Valid || sum.Applications != 8 {
		t.Fatalf("json: exit %d, %v, %+v", code, err, sum)
	}
	// validate needs no vendored charts and writes nothing.
	if err := os.RemoveAll(filepath.Join(repo, "charts")); err != nil {
		t.Fatal(err)
	}
	if _, _, code := runCLI(t, "validate", "--repo", repo); code != ExitOK {
		t.Errorf("validate without charts/: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(repo, "charts")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("validate vendored charts")
	}
	editFile(t, filepath.Join(repo, "fleets", "dev.yaml"), "    - member2", "    - member9")
	stdout, stderr, code = runCLI(t, "validate", "--repo", repo, "-o", "json")
	var bad validateSummary
	if err := json.Unmarshal([]byte(stdout), &bad); err != nil || code != ExitError || bad.Valid || len(bad.Errors) == 0 {
		t.Fatalf("invalid repo: exit %d, %v, %+v", code, err, bad)
	}
	if !strings.Contains(stderr, "fleets/dev.yaml:") {
		t.Errorf("stderr does not name the file:\n%s", stderr)
	}
}

// TestRenderVendorsFromChartRepository: render pulls chart-repo charts from
// a real Helm repository on loopback HTTP into charts/, pinned in the lock
// file; the next render reuses them without any request.
func TestRenderVendorsFromChartRepository(t *testing.T) {
	charts, err := chartrepo.PackageDirs("../../test/fixtures/charts")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := chartrepo.Serve(charts, "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	repo := copyTree(t, templateDir)
	for _, d := range []string{"charts", "rendered"} {
		if err := os.RemoveAll(filepath.Join(repo, d)); err != nil {
			t.Fatal(err)
		}
	}
	for _, app := range []string{"mysql-db", "redis-cache"} {
		editFile(t, filepath.Join(repo, "apps", app, "app.yaml"), "https://charts.example.com/flotilla", srv.URL)
	}
	stdout, stderr, code := runCLI(t, "render", "--repo", repo, "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var sum renderSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	wantCharts := []chartSummary{
		{Repo: srv.URL, Chart: "mysql-db", Version: "0.1.0", Path: "charts/mysql-db/0.1.0"},
		{Repo: srv.URL, Chart: "redis-cache", Version: "0.2.0", Path: "charts/redis-cache/0.2.0"},
	}
	for i := range sum.Charts {
		if !strings.HasPrefix(sum.Charts[i].Digest, "sha256:") {
			t.Errorf("chart %s has no digest", sum.Charts[i].Chart)
		}
		sum.Charts[i].Digest = ""
	}
	if len(sum.Charts) != 2 || sum.Charts[0] != wantCharts[0] || sum.Charts[1] != wantCharts[1] {
		t.Errorf("charts = %+v, want %+v", sum.Charts, wantCharts)
	}
	reqs := srv.Requests()
	for _, p := range []string{"/charts/index.yaml", "/charts/mysql-db-0.1.0.tgz", "/charts/redis-cache-0.2.0.tgz"} {
		if reqs[p] != 1 {
			t.Errorf("%s requested %d times, want 1 (%v)", p, reqs[p], reqs)
		}
	}
	for _, f := range []string{"charts/charts.lock.yaml", "charts/mysql-db/0.1.0/Chart.yaml", "charts/redis-cache/0.2.0/templates/deployment.yaml"} {
		if _, err := os.Stat(filepath.Join(repo, f)); err != nil {
			t.Errorf("%s not vendored: %v", f, err)
		}
	}
	s, err := slice.Read(repo, "member1")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range s.Units {
		if u.Name == "mysql-db" && (u.Helm == nil || u.Helm.Chart != "charts/mysql-db/0.1.0") {
			t.Errorf("mysql-db unit = %+v", u)
		}
	}
	// Offline from now on: the lock pins the versions and charts/ has them.
	before := srv.TotalRequests()
	srv.Close()
	if stdout, stderr, code := runCLI(t, "render", "--check", "--repo", repo); code != ExitOK {
		t.Fatalf("offline check: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if srv.TotalRequests() != before {
		t.Errorf("the second render made %d requests", srv.TotalRequests()-before)
	}
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, false)
	p.clusters(500, 1000)
	if b.Len() != 0 {
		t.Errorf("progress printed to a non-terminal without --progress: %q", b.String())
	}
	p = newProgress(&b, true)
	for i := 1; i <= 1200; i++ {
		p.clusters(i, 1200)
	}
	if want := "compiled 500/1200 clusters\ncompiled 1000/1200 clusters\ncompiled 1200/1200 clusters\n"; b.String() != want {
		t.Errorf("progress = %q, want %q", b.String(), want)
	}
	b.Reset()
	newProgress(&b, true).clusters(3, 3)
	if b.Len() != 0 {
		t.Errorf("progress printed for a small fleet: %q", b.String())
	}
}

func TestRenderHelp(t *testing.T) {
	for _, cmd := range []string{"render", "validate"} {
		stdout, _, code := runCLI(t, cmd, "--help")
		if code != ExitOK || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "--repo") {
			t.Errorf("%s --help: exit %d\n%s", cmd, code, stdout)
		}
	}
	if _, _, code := runCLI(t, "render", "-o", "yaml", "--repo", templateDir); code != ExitError {
		t.Errorf("render -o yaml: exit %d, want %d", code, ExitError)
	}
}

// TestRenderWarnsUndeclaredNamespace: an application moved to a namespace
// no fleet declares renders, with a warning naming the file, line and
// field and saying the apply will fail.
func TestRenderWarnsUndeclaredNamespace(t *testing.T) {
	repo := copyTree(t, templateDir)
	editFile(t, filepath.Join(repo, "apps", "nginx", "app.yaml"), "  namespace: web\n", "  namespace: checkout\n")
	stdout, stderr, code := runCLI(t, "render", "--repo", repo)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	want := "apps/nginx/app.yaml:9: spec.namespace: namespace declared by no fleet: application nginx puts objects in namespace checkout"
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, "its apply will fail there") {
		t.Errorf("stderr does not warn\n%s\nwant %s", stderr, want)
	}
}
