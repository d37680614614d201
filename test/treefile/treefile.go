package treefile

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Write writes files (slash-separated paths → content) under dir,
// creating directories as needed.
func Write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		WriteFile(t, filepath.Join(dir, filepath.FromSlash(p)), content)
	}
}

// WriteFile writes one file, creating its directory as needed.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Read returns the regular files under dir, leaving out .git directories
// and symbolic links; only those under the given slash-separated paths
// (files or directories) when any are given.
func Read(t testing.TB, dir string, under ...string) map[string]string {
	t.Helper()
	if len(under) == 0 {
		under = []string{"."}
	}
	out := map[string]string{}
	for _, u := range under {
		err := filepath.WalkDir(filepath.Join(dir, filepath.FromSlash(u)), func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && d.Name() == ".git":
				return filepath.SkipDir
			case !d.Type().IsRegular():
				return nil
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
