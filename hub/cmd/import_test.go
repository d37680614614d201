package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const kuratorFixtures = "../kuratorimport/testdata"

// TestImportKuratorThenValidate: the command writes the converted files,
// prints each warning with its file and line, and the result passes
// flotilla validate; a second import refuses to overwrite, --force does.
func TestImportKuratorThenValidate(t *testing.T) {
	repo := t.TempDir()
	stdout, stderr, code := runCLI(t, "import", "kurator", filepath.Join(kuratorFixtures, "git-kustomize"), "--into", repo)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, want := range []string{"wrote apps/gitrepo-kustomization-demo-webapp/app.yaml", "wrote fleets/quickstart.yaml", "5 files, 9 warnings"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{
		"warning: " + filepath.Join(kuratorFixtures, "git-kustomize", "app.yaml") + ":37: spec.syncPolicies[1].kustomization.suspend: no Flotilla equivalent",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// The Git source is written as spec.source.git, which render vendors.
	if data, _ := os.ReadFile(filepath.Join(repo, "apps", "gitrepo-kustomization-demo-webapp", "app.yaml")); !strings.Contains(string(data), "git:\n      path: deploy/webapp\n      ref:\n        branch: master\n      url: https://github.com/stefanprodan/podinfo\n") {
		t.Errorf("the Git source is not spec.source.git:\n%s", data)
	}
	stdout, stderr, code = runCLI(t, "validate", "--repo", repo)
	if code != ExitOK || !strings.Contains(stdout, "fleet repo is valid: 2 clusters, 1 fleet, 2 applications") {
		t.Fatalf("validate: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	app := filepath.Join(repo, "apps", "gitrepo-kustomization-demo-webapp", "app.yaml")
	if err := os.WriteFile(app, []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runCLI(t, "import", "kurator", filepath.Join(kuratorFixtures, "git-kustomize"), "--into", repo)
	if code != ExitError || !strings.Contains(stderr, "use --force") {
		t.Fatalf("second import: exit %d, stderr %s; want a refusal", code, stderr)
	}
	if data, _ := os.ReadFile(app); string(data) != "edited\n" {
		t.Errorf("refused import changed %s: %q", app, data)
	}
	stdout, stderr, code = runCLI(t, "import", "kurator", filepath.Join(kuratorFixtures, "git-kustomize"), "--into", repo, "--force", "-o", "json")
	if code != ExitOK {
		t.Fatalf("--force: exit %d\nstderr: %s", code, stderr)
	}
	var sum importSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Files) != 5 || len(sum.Warnings) != 9 || sum.Warnings[0].Line == 0 {
		t.Errorf("json summary: %d files, %d warnings: %+v", len(sum.Files), len(sum.Warnings), sum)
	}
	if data, _ := os.ReadFile(app); !strings.Contains(string(data), "kind: Application") {
		t.Errorf("--force did not rewrite %s: %q", app, data)
	}
}

// TestImportKuratorBadInputWritesNothing: one bad document among good ones
// fails the import with its file and line, and nothing is written.
func TestImportKuratorBadInputWritesNothing(t *testing.T) {
	in := t.TempDir()
	good, err := os.ReadFile(filepath.Join(kuratorFixtures, "git-kustomize", "fleet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "a.yaml"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := "apiVersion: apps.kurator.dev/v1alpha1\nkind: Application\nmetadata:\n  namespace: default\n"
	if err := os.WriteFile(filepath.Join(in, "b.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	_, stderr, code := runCLI(t, "import", "kurator", in, "--into", repo)
	want := filepath.Join(in, "b.yaml") + ":3: metadata.name: required field missing"
	if code != ExitError || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stderr:\n%s\nwant %q", code, stderr, want)
	}
	entries, err := os.ReadDir(repo)
	if err != nil || len(entries) != 0 {
		t.Errorf("the failed import wrote %v (%v)", entries, err)
	}
}
