package gitserver

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// GitErr runs the git CLI in dir ("" for the test's working directory),
// isolated from the user's and the system's configuration and never
// prompting, and returns its output (stdout and stderr), trimmed.
func GitErr(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	// Generous: only a hung command takes this long.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+t.TempDir(), "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Git is GitErr that fails the test when git does.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := GitErr(t, dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}
