package plan

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/test/prereqs"
)

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"one line changed", "a\nb\nc\n", "a\nB\nc\n", "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"append", "a\n", "a\nb\n", "@@ -1 +1,2 @@\n a\n+b\n"},
		{"from empty", "", "a\nb\n", "@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"to empty", "a\n", "", "@@ -1 +0,0 @@\n-a\n"},
		{
			"context is three lines",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			"1\n2\n3\n4\nFIVE\n6\n7\n8\n9\n",
			"@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+FIVE\n 6\n 7\n 8\n",
		},
		{
			"distant changes make two hunks",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n",
			"ONE\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\nTWELVE\n",
			"@@ -1,4 +1,4 @@\n-1\n+ONE\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+TWELVE\n",
		},
		{
			"close changes share a hunk",
			"1\n2\n3\n4\n5\n6\n7\n8\n",
			"ONE\n2\n3\n4\n5\n6\nSEVEN\n8\n",
			"@@ -1,8 +1,8 @@\n-1\n+ONE\n 2\n 3\n 4\n 5\n 6\n-7\n+SEVEN\n 8\n",
		},
		{
			"deletions before insertions",
			"a\nx\ny\nb\n",
			"a\np\nq\nb\n",
			"@@ -1,4 +1,4 @@\n a\n-x\n-y\n+p\n+q\n b\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := unifiedDiff(tt.a, tt.b)
			if got != tt.want {
				t.Errorf("unifiedDiff:\n%s\nwant:\n%s", got, tt.want)
			}
			if tt.want != "" {
				if back := applyPatch(t, tt.a, got); back != tt.b {
					t.Errorf("patch does not reproduce b: got %q", back)
				}
			}
		})
	}
}

// TestUnifiedDiffMatchesGNUDiff compares hunks with diff -u on inputs whose
// shortest edit script is unique.
func TestUnifiedDiffMatchesGNUDiff(t *testing.T) {
	diffBin := prereqs.LookPath(t, "diff")
	var a, b strings.Builder
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&a, "line %d\n", i)
		switch {
		case i%17 == 3:
			fmt.Fprintf(&b, "changed %d\n", i)
		case i%23 == 5:
			// deleted
		default:
			fmt.Fprintf(&b, "line %d\n", i)
		}
		if i%29 == 7 {
			fmt.Fprintf(&b, "inserted after %d\n", i)
		}
	}
	dir := t.TempDir()
	pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(pa, []byte(a.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pb, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(diffBin, "-u", pa, pb).Output()
	lines := strings.SplitN(string(out), "\n", 3) // drop the --- and +++ headers
	if len(lines) < 3 {
		t.Fatalf("diff -u printed %q", out)
	}
	if got := unifiedDiff(a.String(), b.String()); got != lines[2] {
		t.Errorf("unifiedDiff:\n%s\ndiff -u:\n%s", got, lines[2])
	}
}

func TestMyersFallsBackBeyondMaxEditDistance(t *testing.T) {
	var a, b []string
	for i := 0; i < maxEditDistance+10; i++ {
		a = append(a, fmt.Sprintf("a%d", i))
		b = append(b, fmt.Sprintf("b%d", i))
	}
	es := lineEdits(a, b)
	if len(es) != len(a)+len(b) {
		t.Fatalf("%d edits, want %d", len(es), len(a)+len(b))
	}
	if back := applyPatch(t, strings.Join(a, "\n")+"\n", unifiedDiff(strings.Join(a, "\n")+"\n", strings.Join(b, "\n")+"\n")); back != strings.Join(b, "\n")+"\n" {
		t.Error("fallback diff does not reproduce b")
	}
}

func FuzzUnifiedDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\nd\n")
	f.Add("", "x\n")
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "0\n2\n3\n4\n5\n6\n7\n8\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		// Lines are what the diff sees: compare texts with a final newline.
		if a != "" && !strings.HasSuffix(a, "\n") {
			a += "\n"
		}
		if b != "" && !strings.HasSuffix(b, "\n") {
			b += "\n"
		}
		if len(a) > 4096 || len(b) > 4096 {
			return
		}
		d := unifiedDiff(a, b)
		if (d == "") != (a == b) {
			t.Fatalf("empty diff %v for equal %v", d == "", a == b)
		}
		if d != "" {
			if back := applyPatch(t, a, d); back != b {
				t.Fatalf("patch of %q with\n%s\ngives %q, want %q", a, d, back, b)
			}
		}
	})
}

// applyPatch applies unified hunks to a, checking context and deletions.
func applyPatch(t *testing.T, a, patch string) string {
	t.Helper()
	src := splitLines(a)
	var out []string
	pos := 0
	lines := splitLines(patch)
	for i := 0; i < len(lines); {
		h := lines[i]
		if !strings.HasPrefix(h, "@@ -") {
			t.Fatalf("bad hunk header %q", h)
		}
		old := strings.Fields(h)[1][1:]
		startStr, countStr, _ := strings.Cut(old, ",")
		start, err := strconv.Atoi(startStr)
		if err != nil {
			t.Fatalf("bad hunk header %q", h)
		}
		if countStr != "0" {
			start-- // 1-based, except for an empty old side
		}
		if start < pos {
			t.Fatalf("hunk %q overlaps", h)
		}
		out = append(out, src[pos:start]...)
		pos = start
		i++
		for ; i < len(lines) && !strings.HasPrefix(lines[i], "@@"); i++ {
			l := lines[i]
			switch l[0] {
			case ' ', '-':
				if pos >= len(src) || src[pos] != l[1:] {
					t.Fatalf("hunk %q: line %d is %q, patch says %q", h, pos+1, at(src, pos), l)
				}
				if l[0] == ' ' {
					out = append(out, l[1:])
				}
				pos++
			case '+':
				out = append(out, l[1:])
			default:
				t.Fatalf("bad patch line %q", l)
			}
		}
	}
	out = append(out, src[pos:]...)
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<EOF>"
}
