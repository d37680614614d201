package cmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/test/golden"
)

const fleetURL = "https://git.example.com/platform/fleet.git"

// initFleet runs `flotilla init` into a fresh directory.
func initFleet(t *testing.T, extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	if _, stderr, code := runCLI(t, append([]string{"init", dir}, extra...)...); code != ExitOK {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	return dir
}

func TestInitCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	stdout, stderr, code := runCLI(t, "init", dir, "--git", "--branch", "trunk")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "Created a fleet repo in "+dir) || !strings.Contains(stdout, "on branch trunk") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		t.Error("--git made no repository")
	}
	if _, stdout, code := runCLI(t, "validate", "--repo", dir); code != ExitOK {
		t.Errorf("the new repo does not validate: %s", stdout)
	}
	_, stderr, code = runCLI(t, "init", dir)
	if code != ExitError || !strings.Contains(stderr, "not empty") || !strings.Contains(stderr, "--force") {
		t.Errorf("init into a non-empty dir: exit %d, %s", code, stderr)
	}
}

// TestBootstrapYAMLGolden: `flotilla bootstrap -o yaml` registers the
// cluster (a valid cluster file that render then slices) and prints its
// install, compared with testdata/bootstrap-member3.yaml.
func TestBootstrapYAMLGolden(t *testing.T) {
	dir := initFleet(t)
	stdout, stderr, code := runCLI(t, "bootstrap", "member3", "--repo", dir,
		"--label", "env=production", "-l", "region=eu-west-1,type=cloud", "--repo-url", fleetURL)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden.Assert(t, "testdata/bootstrap-member3.yaml", stdout)
	for _, want := range []string{
		"Registered cluster member3 in " + filepath.Join(dir, "clusters", "member3.yaml"),
		"refs/heads/flotilla/status/member3",
		"flotilla-system/flotilla-git-credentials",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	repo, err := fleet.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	c := repo.Cluster("member3")
	if c == nil || c.Metadata.Labels["region"] != "eu-west-1" || c.Metadata.Labels["type"] != "cloud" || c.Metadata.Labels["env"] != "production" {
		t.Fatalf("registered cluster %+v", c)
	}
	if _, stderr, code := runCLI(t, "render", "--repo", dir); code != ExitOK {
		t.Fatalf("render after bootstrap: exit %d: %s", code, stderr)
	}
	slices, _ := filepath.Glob(filepath.Join(dir, "rendered", "*", "member3", "slice.yaml"))
	if len(slices) != 1 {
		t.Errorf("render made no slice for member3")
	}
}

func TestBootstrapKustomizeDir(t *testing.T) {
	dir := initFleet(t)
	out := filepath.Join(t.TempDir(), "install")
	stdout, stderr, code := runCLI(t, "bootstrap", "edge-7", "--repo", dir, "-l", "type=edge", "--repo-url", "ssh://git@git.example.com/fleet.git",
		"--credentials-secret", "fleet-deploy-key", "--namespace", "flotilla", "-o", "kustomize-dir", "--output-dir", out)
	if code != ExitOK || stdout != "" {
		t.Fatalf("exit %d, stdout %q: %s", code, stdout, stderr)
	}
	for _, f := range []string{"kustomization.yaml", "agent-config.yaml", "git-credentials.yaml", "base/daemonset.yaml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if !strings.Contains(stderr, "kubectl apply --server-side -k "+out) || !strings.Contains(stderr, "flotilla/fleet-deploy-key") {
		t.Errorf("stderr:\n%s", stderr)
	}
	// Writing again into the same directory needs --force (the cluster too).
	_, stderr, code = runCLI(t, "bootstrap", "edge-7", "--repo", dir, "--repo-url", fleetURL, "-o", "kustomize-dir", "--output-dir", out, "--force")
	if code != ExitOK {
		t.Errorf("forced re-run: exit %d: %s", code, stderr)
	}
}

// TestBootstrapRefusals: each mistake is an error that changes nothing.
func TestBootstrapRefusals(t *testing.T) {
	dir := initFleet(t)
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"registered already", []string{"member1", "--repo-url", fleetURL}, "cluster already registered in clusters/member1.yaml"},
		{"no repo URL, no origin", []string{"member9"}, "--repo-url is required"},
		{"credentials in the URL", []string{"member9", "--repo-url", "https://bot:hunter2@git.example.com/fleet.git"}, "holds credentials"},
		{"bad image", []string{"member9", "--repo-url", fleetURL, "--image", "agent"}, "pin the image"},
		{"bad label", []string{"member9", "--repo-url", fleetURL, "-l", "env"}, "want key=value"},
		{"conflicting labels", []string{"member9", "--repo-url", fleetURL, "-l", "env=a,env=b"}, "given twice"},
		{"invalid label value", []string{"member9", "--repo-url", fleetURL, "-l", "env=not ok"}, "invalid label value"},
		{"bad cluster name", []string{"Member_9", "--repo-url", fleetURL}, "cluster name"},
		{"kustomize-dir without a directory", []string{"member9", "--repo-url", fleetURL, "-o", "kustomize-dir"}, "needs --output-dir"},
		{"unknown output", []string{"member9", "--repo-url", fleetURL, "-o", "json"}, "want yaml or kustomize-dir"},
		{"non-empty output dir", []string{"member9", "--repo-url", fleetURL, "-o", "kustomize-dir", "--output-dir", nonEmpty}, "not empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"bootstrap"}, tc.args...)
			args = append(args, "--repo", dir)
			stdout, stderr, code := runCLI(t, args...)
			if code != ExitError || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q, want exit 2 and %q", code, stderr, tc.want)
			}
			if stdout != "" {
				t.Errorf("manifests printed after an error:\n%.200s", stdout)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Error("the error repeats a password")
			}
			if _, err := os.Stat(filepath.Join(dir, "clusters", "member9.yaml")); err == nil {
				t.Fatal("the cluster was registered anyway")
			}
		})
	}
}

// TestBootstrapRepoURLFromOrigin: without --repo-url, the fleet repo's
// origin remote is used, an scp-like address turned into ssh://.
func TestBootstrapRepoURLFromOrigin(t *testing.T) {
	dir := initFleet(t, "--git")
	git := exec.Command("git", "remote", "add", "origin", "git@git.example.com:platform/fleet.git")
	git.Dir = dir
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git remote add: %v: %s", err, out)
	}
	stdout, stderr, code := runCLI(t, "bootstrap", "member9", "--repo", dir)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "FLOTILLA_REPO_URL: ssh://git@git.example.com/platform/fleet.git") {
		t.Errorf("the install does not follow the origin remote:\n%s", stdout)
	}
}
