package agentproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// BinaryEnv names a flotilla-agent binary to use as it is.
const BinaryEnv = "FLOTILLA_AGENT_BIN"

var binary struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the flotilla-agent binary, found or built once per test
// binary: $FLOTILLA_AGENT_BIN; else bin/flotilla-agent (`make build`, in
// testenv.BinDir) when it is newer than every Go file of the packages it is
// built from; else a go build (CGO off) of ./agent/flotilla-agent into the user cache directory,
// which go build leaves alone when it is up to date. A stale binary never
// fakes a result.
func Binary(t testing.TB) string {
	t.Helper()
	binary.once.Do(func() { binary.path, binary.err = findBinary() })
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func findBinary() (string, error) {
	if bin := os.Getenv(BinaryEnv); bin != "" {
		return bin, nil
	}
	root := ModuleRoot()
	if dir, err := testenv.BinDir(); err == nil {
		bin := filepath.Join(dir, "flotilla-agent")
		if fi, err := os.Stat(bin); err == nil {
			if newer, err := depsNewerThan(root, fi.ModTime()); err == nil && !newer {
				return bin, nil
			}
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "flotilla", "e2e", "flotilla-agent")
	cmd := exec.Command("go", "build", "-o", out, "./agent/flotilla-agent")
	cmd.Dir = root
	// As `make build` and the image build it (memory figures depend on it).
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./agent/flotilla-agent: %v\n%s", err, b)
	}
	return out, nil
}

// depsNewerThan reports a non-test Go file of the agent's module
// dependencies, or go.mod or go.sum, modified after t.
func depsNewerThan(root string, t time.Time) (bool, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{end}}{{end}}", "./agent/flotilla-agent")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return false, err
	}
	files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for _, f := range fields[1:] {
			files = append(files, filepath.Join(fields[0], f))
		}
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.ModTime().After(t) {
			return true, nil
		}
	}
	return false, nil
}

// ModuleRoot is the repository's root directory: where the go.mod above
// this source file is.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
