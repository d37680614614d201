package clidocs

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	agentcmd "github.com/flotilla-gitops/flotilla/agent/cmd"
	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
)

var update = flag.Bool("update", false, "rewrite docs/cli/ from the commands")

const docsDir = "../../docs/cli"

// TestCLIDocs compares docs/cli/ with what the commands generate.
func TestCLIDocs(t *testing.T) {
	gen := t.TempDir()
	for _, root := range []*cobra.Command{hubcmd.NewRootCommand(), agentcmd.NewRootCommand()} {
		root.DisableAutoGenTag = true
		if err := doc.GenMarkdownTree(root, gen); err != nil {
			t.Fatal(err)
		}
	}
	want := readDir(t, gen)
	if *update {
		if err := os.RemoveAll(docsDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(docsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range want {
			if err := os.WriteFile(filepath.Join(docsDir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	got := readDir(t, docsDir)
	for name, content := range want {
		if got[name] != content {
			t.Errorf("docs/cli/%s is stale: run go test ./test/clidocs -update", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/cli/%s documents no command: run go test ./test/clidocs -update", name)
		}
	}
}

func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}
