package gitrepo_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

func TestListTreeAndBlobHash(t *testing.T) {
	dir, first, second := localRepo(t)
	ctx := context.Background()
	files, err := gitrepo.ListTree(ctx, dir, second, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		kind := ""
		if f.Executable {
			kind = " (x)"
		}
		if f.Symlink {
			kind = " (link)"
		}
		got = append(got, f.Path+kind)
		// The hash is git's, and BlobHash agrees with it.
		if want := git(t, dir, "rev-parse", second+":"+f.Path); f.Hash != want {
			t.Errorf("%s: hash %s, git says %s", f.Path, f.Hash, want)
		}
		if !f.Symlink {
			data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
			if err != nil {
				t.Fatal(err)
			}
			if h := gitrepo.BlobHash(data); h != f.Hash {
				t.Errorf("%s: BlobHash %s, tree %s", f.Path, h, f.Hash)
			}
		}
	}
	if want := "a.yaml, link.yaml (link), sub/b.yaml, sub/new.yaml, tool.sh (x)"; strings.Join(got, ", ") != want {
		t.Errorf("ListTree: %s, want %s", strings.Join(got, ", "), want)
	}
	sub, err := gitrepo.ListTree(ctx, dir, first, "sub/")
	if err != nil || len(sub) != 1 || sub[0].Path != "sub/b.yaml" {
		t.Errorf("ListTree(sub) = %+v, %v", sub, err)
	}
	if none, err := gitrepo.ListTree(ctx, dir, first, "missing"); err != nil || len(none) != 0 {
		t.Errorf("ListTree(missing) = %+v, %v", none, err)
	}
}

func TestExportTreePaths(t *testing.T) {
	dir, _, second := localRepo(t)
	dest := filepath.Join(t.TempDir(), "out")
	if err := gitrepo.ExportTreePaths(context.Background(), dir, second, dest, []string{"sub", "tool.sh"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dest, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	if want := "sub/b.yaml, sub/new.yaml, tool.sh"; strings.Join(got, ", ") != want {
		t.Errorf("exported %s, want %s", strings.Join(got, ", "), want)
	}
	if err := gitrepo.ExportTreePaths(context.Background(), dir, second, t.TempDir(), []string{"../x"}); err == nil {
		t.Error("a path leaving the tree was accepted")
	}
}
