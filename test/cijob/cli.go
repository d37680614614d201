package cijob

import (
	"os"
	"path/filepath"
	"testing"
)

// CLIEnv, set to "1", makes a test binary whose TestMain calls
// ServeCLIIfRequested run as the CLI instead of its tests.
const CLIEnv = "FLOTILLA_TEST_AS_CLI"

// ServeCLIIfRequested runs main and exits with its code when this test
// binary was started as the CLI (CLIEnv set, see CLIOnPath). Call it first
// in TestMain.
func ServeCLIIfRequested(main func() int) {
	if os.Getenv(CLIEnv) == "1" {
		os.Exit(main())
	}
}

// CLIOnPath puts this test binary on PATH as name (the `flotilla` of the
// template's jobs: the code under test, not a stale build). It returns the
// directory it is in, where a test may add other commands, and the
// variables to add to a job's environment.
func CLIOnPath(t testing.TB, name string) (dir string, env []string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return dir, []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH"), CLIEnv + "=1"}
}
