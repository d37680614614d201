package cmd

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 clusters", 1: "1 cluster", 2: "2 clusters"} {
		if got := plural(n, "cluster", "clusters"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestRenderTextSingular: counts of one take the singular noun.
func TestRenderTextSingular(t *testing.T) {
	var b strings.Builder
	printRenderText(&b, &renderSummary{Clusters: 1, Units: 1}, &slice.Changes{Added: []string{"a"}})
	if want := "rendered 1 cluster, 1 unit: 1 file added, 0 changed, 0 removed\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	printRenderText(&b, &renderSummary{Check: true, Clusters: 2, Units: 3}, &slice.Changes{Changed: []string{"a"}})
	if !strings.HasPrefix(b.String(), "rendered/ is stale: 1 file differs from a fresh render (2 clusters, 3 units)") {
		t.Errorf("got %q", b.String())
	}
}

// TestOneProblemFound: a single input problem is counted as one problem.
func TestOneProblemFound(t *testing.T) {
	repo := copyTree(t, templateDir)
	editFile(t, filepath.Join(repo, "apps", "backend", "app.yaml"), "fleet: dev", "fleet: devv")
	_, stderr, code := runCLI(t, "validate", "--repo", repo)
	if code != ExitError || !strings.HasSuffix(stderr, "\n1 problem found\n") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}
