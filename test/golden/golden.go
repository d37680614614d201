package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files (testdata/...) with the output")

// Updating reports whether the test binary runs with -update.
func Updating() bool { return *update }

// Assert compares got with the file at path. With -update it writes got to
// path (creating its directory) instead. A missing file or a difference fails
// the test with a line diff of the golden file against got.
func Assert[T string | []byte](t testing.TB, path string, got T) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("output differs from %s (go test -update rewrites it; review the diff):\n%s", path, Diff(string(want), string(got)))
	}
}

// Diff is a line diff of want against got: context lines start with two
// spaces, lines only in want with "- ", lines only in got with "+ ". Runs of
// more than three unchanged lines are elided; "" when they are equal.
func Diff(want, got string) string {
	if want == got {
		return ""
	}
	w, g := splitLines(want), splitLines(got)
	// Common prefix and suffix, then a longest-common-subsequence diff of
	// the middle (bounded: a huge middle is shown as removed and added).
	pre := 0
	for pre < len(w) && pre < len(g) && w[pre] == g[pre] {
		pre++
	}
	suf := 0
	for suf < len(w)-pre && suf < len(g)-pre && w[len(w)-1-suf] == g[len(g)-1-suf] {
		suf++
	}
	var ops []op
	for _, l := range w[:pre] {
		ops = append(ops, op{' ', l})
	}
	ops = append(ops, middle(w[pre:len(w)-suf], g[pre:len(g)-suf])...)
	for _, l := range w[len(w)-suf:] {
		ops = append(ops, op{' ', l})
	}
	if len(ops) > 0 && strings.TrimSuffix(want, "\n") == strings.TrimSuffix(got, "\n") {
		return "(the same lines; one ends in a newline, the other does not)"
	}
	return format(ops, 3)
}

type op struct {
	kind byte // ' ', '-', '+'
	line string
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// maxCells bounds the LCS table of middle.
const maxCells = 4 << 20

func middle(w, g []string) []op {
	var ops []op
	if len(w)*len(g) > maxCells {
		for _, l := range w {
			ops = append(ops, op{'-', l})
		}
		for _, l := range g {
			ops = append(ops, op{'+', l})
		}
		return ops
	}
	// lcs[i][j] is the LCS length of w[i:] and g[j:].
	lcs := make([][]int32, len(w)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(g)+1)
	}
	for i := len(w) - 1; i >= 0; i-- {
		for j := len(g) - 1; j >= 0; j-- {
			if w[i] == g[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			ops = append(ops, op{' ', w[i]})
			i++
			j++
		case i < len(w) && (j == len(g) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', w[i]})
			i++
		default:
			ops = append(ops, op{'+', g[j]})
			j++
		}
	}
	return ops
}

// format prints ops with context unchanged lines around each change and a
// "@@ line N @@" header per hunk (N: the golden file's line the hunk starts at).
func format(ops []op, context int) string {
	keep := make([]bool, len(ops))
	for k, o := range ops {
		if o.kind == ' ' {
			continue
		}
		for d := max(0, k-context); d <= min(len(ops)-1, k+context); d++ {
			keep[d] = true
		}
	}
	var b strings.Builder
	wantLine := 0
	inHunk := false
	for k, o := range ops {
		if o.kind != '+' {
			wantLine++
		}
		if !keep[k] {
			inHunk = false
			continue
		}
		if !inHunk {
			n := wantLine
			if o.kind == '+' {
				n++
			}
			fmt.Fprintf(&b, "@@ line %d @@\n", n)
			inHunk = true
		}
		fmt.Fprintf(&b, "%c %s\n", o.kind, o.line)
	}
	return b.String()
}
