package prereqs_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/test/prereqs"
)

// script is tools/prereqs.sh; go test runs in this package's directory.
var script = filepath.Join("..", "..", "tools", "prereqs.sh")

// TestHostHasPrereqs: the machine running the suite has every tool the
// suite and the demo need.
func TestHostHasPrereqs(t *testing.T) {
	out, err := exec.Command(prereqs.LookPath(t, "bash"), script).CombinedOutput()
	if err != nil {
		t.Fatalf("tools/prereqs.sh: %v\n%s", err, out)
	}
}

// TestPrereqsScriptNamesMissingTools runs the script with a PATH holding
// only some of the tools: it exits 1 naming each missing tool and its
// Debian package, and nothing that is present.
func TestPrereqsScriptNamesMissingTools(t *testing.T) {
	for _, tc := range []struct {
		name    string
		present []string
		missing map[string]string // tool → Debian package
	}{
		{"no gpg", []string{"go", "make", "gcc", "git", "ssh", "ssh-keygen", "diff", "flock", "sha256sum", "chromium", "chromedriver"},
			map[string]string{"gpg": "gnupg", "gpgconf": "gnupg"}},
		{"no ssh-keygen nor diff", []string{"go", "make", "gcc", "git", "gpg", "gpgconf", "ssh", "flock", "sha256sum", "chromium", "chromedriver"},
			map[string]string{"ssh-keygen": "openssh-client", "diff": "diffutils"}},
		{"no git", []string{"go", "make", "gcc", "gpg", "gpgconf", "ssh", "ssh-keygen", "diff", "flock", "sha256sum", "chromium", "chromedriver"},
			map[string]string{"git": "git", "git http-backend": "git"}},
		{"no chromium", []string{"go", "make", "gcc", "git", "gpg", "gpgconf", "ssh", "ssh-keygen", "diff", "flock", "sha256sum"},
			map[string]string{"chromium": "chromium", "chromedriver": "chromium-driver"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, tool := range append([]string{"bash"}, tc.present...) {
				if err := os.Symlink(prereqs.LookPath(t, tool), filepath.Join(dir, tool)); err != nil {
					t.Fatal(err)
				}
			}
			// Not --install: the test must never install packages.
			cmd := exec.Command(filepath.Join(dir, "bash"), script)
			cmd.Env = append(os.Environ(), "PATH="+dir)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			err := cmd.Run()
			out := stderr.String()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1\n%s", err, out)
			}
			for tool, pkg := range tc.missing {
				if !strings.Contains(out, "missing "+tool+" ") || !strings.Contains(out, "Debian package "+pkg) {
					t.Errorf("output does not name the missing %s (package %s):\n%s", tool, pkg, out)
				}
			}
			for _, tool := range tc.present {
				if strings.Contains(out, "missing "+tool+" ") {
					t.Errorf("output names %s, which is present:\n%s", tool, out)
				}
			}
			if lines := strings.Count(out, "tools/prereqs.sh: missing "); lines != len(tc.missing) {
				t.Errorf("%d missing-tool lines, want %d:\n%s", lines, len(tc.missing), out)
			}
			if !strings.Contains(out, "README.md") {
				t.Errorf("output does not point to the README:\n%s", out)
			}
		})
	}
}
