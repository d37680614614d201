package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	for _, tc := range []struct{ name, want, got, diff string }{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"changed line", "a\nb\nc\n", "a\nB\nc\n", "@@ line 1 @@\n  a\n- b\n+ B\n  c\n"},
		{"added at end", "a\n", "a\nb\n", "@@ line 1 @@\n  a\n+ b\n"},
		{"removed", "a\nb\nc\n", "a\nc\n", "@@ line 1 @@\n  a\n- b\n  c\n"},
		{"newline", "a\n", "a", "(the same lines; one ends in a newline, the other does not)"},
		{"context", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n", "@@ line 2 @@\n  2\n  3\n  4\n- 5\n+ five\n  6\n  7\n  8\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := Diff(tc.want, tc.got); d != tc.diff {
				t.Errorf("Diff:\n%s\nwant:\n%s", d, tc.diff)
			}
		})
	}
}

// fakeT records failures instead of failing the test.
type fakeT struct {
	testing.TB
	errors []string
}

func (f *fakeT) Helper()                        {}
func (f *fakeT) Errorf(format string, a ...any) { f.errors = append(f.errors, format) }

func TestAssert(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.golden")
	if err := os.WriteFile(path, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Assert(t, path, "a\nb\n")
	Assert(t, path, []byte("a\nb\n"))
	f := &fakeT{TB: t}
	Assert(f, path, "a\nc\n")
	if len(f.errors) != 1 || !strings.Contains(f.errors[0], "differs") {
		t.Errorf("a difference reported %q", f.errors)
	}
}
