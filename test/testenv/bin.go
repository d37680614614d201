package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// modulePath identifies the repository root when bin/ is located by walking up.
const modulePath = "github.com/flotilla-gitops/flotilla"

// BinDirEnv overrides where the test binaries are looked up.
const BinDirEnv = "FLOTILLA_BIN_DIR"

// ErrToolMissing reports a test binary that `make tools` has not built (yet).
var ErrToolMissing = errors.New("test binary missing: run `make tools`")

// BinDir returns the directory holding the test binaries: $FLOTILLA_BIN_DIR,
// else bin/ next to the go.mod of the flotilla module found by walking up from
// the working directory (go test runs in the package directory).
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("locate bin dir: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if isFlotillaModuleRoot(filepath.Join(dir, "go.mod")) {
			return filepath.Join(dir, "bin"), nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("locate bin dir: no go.mod of %s above %s and %s unset: %w", modulePath, wd, BinDirEnv, ErrToolMissing)
		}
	}
}

func isFlotillaModuleRoot(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == modulePath
		}
	}
	return false
}

// toolPaths resolves the named entries (files or directories) under bin/ and
// fails with ErrToolMissing for the first one that does not exist.
func toolPaths(names ...string) (map[string]string, error) {
	dir, err := BinDir()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	for _, name := range names {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s: %w", p, ErrToolMissing)
		}
		out[name] = p
	}
	return out, nil
}

// globTool returns the files matching pattern under bin/, failing with
// ErrToolMissing when there are none.
func globTool(pattern string) ([]string, error) {
	dir, err := BinDir()
	if err != nil {
		return nil, err
	}
	matches, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return nil, fmt.Errorf("glob %s: %w", pattern, err)
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, pattern), ErrToolMissing)
	}
	return matches, nil
}

// ToolPath is the test binary bin/<name>, or an error wrapping
// ErrToolMissing.
func ToolPath(name string) (string, error) {
	paths, err := toolPaths(name)
	if err != nil {
		return "", err
	}
	return paths[name], nil
}

// RequireTool returns bin/<name>. It fails t when the binary is missing,
// or skips t under -short (`make test-unit` builds no tools).
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := ToolPath(name)
	if err != nil {
		if testing.Short() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	return p
}
