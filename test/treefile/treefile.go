package treefile

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Write writes files under dir, creating directories as needed.
func Write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Read returns the files under dir; only those under the given
// slash-separated paths (files or directories) when any are given.
func Read(t testing.TB, dir string, under ...string) map[string]string {
	t.Helper()
	if len(under) == 0 {
		under = []string{"."}
	}
	out := map[string]string{}
	for _, u := range under {
		err := filepath.WalkDir(filepath.Join(dir, filepath.FromSlash(u)), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = string(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
