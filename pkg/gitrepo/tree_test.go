package gitrepo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
)

// localRepo makes a work tree with two commits (the second tagged, with an
// annotated tag) and returns its path and the two hashes.
func localRepo(t *testing.T) (dir, first, second string) {
	t.Helper()
	dir = writeDir(t, map[string]string{"a.yaml": "a: 1\n", "sub/b.yaml": "b: 1\n", "gone.txt": "bye\n"})
	git(t, dir, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "tool.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("a.yaml", filepath.Join(dir, "link.yaml"))
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "one")
	first = git(t, dir, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("a: 2\n"), 0o644)
	os.Remove(filepath.Join(dir, "gone.txt"))
	os.WriteFile(filepath.Join(dir, "sub/new.yaml"), []byte("n\n"), 0o644)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "two")
	git(t, dir, "tag", "-a", "-m", "release", "v1")
	second = git(t, dir, "rev-parse", "HEAD")
	return dir, first, second
}

func TestResolveRevision(t *testing.T) {
	dir, first, second := localRepo(t)
	for _, tc := range []struct {
		rev, want string
		err       error
	}{
		{"main", second, nil},
		{"HEAD", second, nil},
		{"v1", second, nil}, // annotated tag, peeled to its commit
		{"refs/tags/v1", second, nil},
		{first, first, nil},
		{first[:10], first, nil},
		{"HEAD~1", first, nil},
		{"nope", "", gitrepo.ErrRevisionNotFound},
		{strings.Repeat("0", 40), "", gitrepo.ErrRevisionNotFound},
	} {
		got, err := gitrepo.ResolveRevision(dir, tc.rev)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("ResolveRevision(%q) = %q, %v; want %q, %v", tc.rev, got, err, tc.want, tc.err)
		}
	}
	// A subdirectory of the work tree finds the repository.
	if got, err := gitrepo.ResolveRevision(filepath.Join(dir, "sub"), "main"); err != nil || got != second {
		t.Errorf("from a subdirectory: %q, %v", got, err)
	}
	if _, err := gitrepo.ResolveRevision(t.TempDir(), "main"); err == nil {
		t.Error("a directory without a repository resolved")
	}
}

func TestExportTree(t *testing.T) {
	dir, first, _ := localRepo(t)
	ctx := context.Background()
	dest := filepath.Join(t.TempDir(), "out")
	if err := gitrepo.ExportTree(ctx, dir, first, dest); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a.yaml": "a: 1\n", "sub/b.yaml": "b: 1\n", "gone.txt": "bye\n", "tool.sh": "#!/bin/sh\n"}
	if got := readDir(t, dest); !equalFiles(got, want) {
		t.Fatalf("exported %v", got)
	}
	if fi, _ := os.Stat(filepath.Join(dest, "tool.sh")); fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("tool.sh mode %v", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(dest, "a.yaml")); fi.Mode().Perm()&0o111 != 0 {
		t.Fatalf("a.yaml mode %v", fi.Mode())
	}
	if target, err := os.Readlink(filepath.Join(dest, "link.yaml")); err != nil || target != "a.yaml" {
		t.Fatalf("link.yaml -> %q, %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(dest, ".git")); err == nil {
		t.Fatal(".git exported")
	}
	if err := gitrepo.ExportTree(ctx, dir, "main", dest); err == nil {
		t.Fatal("export into a non-empty directory succeeded")
	}
	if err := gitrepo.ExportTree(ctx, dir, "nope", filepath.Join(t.TempDir(), "x")); !errors.Is(err, gitrepo.ErrRevisionNotFound) {
		t.Fatalf("unknown revision: %v", err)
	}
}

func TestChangedFiles(t *testing.T) {
	dir, first, second := localRepo(t)
	got, err := gitrepo.ChangedFiles(context.Background(), dir, first, second)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "a.yaml,gone.txt,sub/new.yaml" {
		t.Fatalf("ChangedFiles = %v", got)
	}
	if none, err := gitrepo.ChangedFiles(context.Background(), dir, "main", "v1"); err != nil || len(none) != 0 {
		t.Fatalf("same commit: %v, %v", none, err)
	}
}

func TestReadCommit(t *testing.T) {
	dir, first, second := localRepo(t)
	c, err := gitrepo.ReadCommit(dir, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash != second || c.Message != "two\n" || len(c.Parents) != 1 || c.Parents[0] != first || c.RawSignature != "" {
		t.Fatalf("ReadCommit = %+v", c)
	}
	if _, err := c.Verify(&signature.KeyRing{}); !errors.Is(err, signature.ErrUnsigned) {
		t.Fatalf("Verify of an unsigned commit: %v", err)
	}
}

// hostileCommit stores in dir's repository a commit whose tree contains an
// entry named name holding a file, and returns its hash.
func hostileCommit(t *testing.T, dir, name string) string {
	t.Helper()
	r, err := gogit.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		obj := r.Storer.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := r.Storer.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	blob := r.Storer.NewEncodedObject()
	blob.SetType(plumbing.BlobObject)
	w, _ := blob.Writer()
	w.Write([]byte("pwned\n"))
	w.Close()
	blobHash, _ := r.Storer.SetEncodedObject(blob)
	inner := store(&object.Tree{Entries: []object.TreeEntry{{Name: "pwned", Mode: filemode.Regular, Hash: blobHash}}})
	root := store(&object.Tree{Entries: []object.TreeEntry{{Name: name, Mode: filemode.Dir, Hash: inner}}})
	sig := object.Signature{Name: "m", Email: "m@x", When: time.Now()}
	return store(&object.Commit{Author: sig, Committer: sig, Message: "hostile", TreeHash: root}).String()
}

func TestExportTreeRejectsHostileTrees(t *testing.T) {
	dir, _, _ := localRepo(t)
	for _, name := range []string{"..", ".git", ".GIT", "a/b", "."} {
		t.Run(name, func(t *testing.T) {
			hash := hostileCommit(t, dir, name)
			base := t.TempDir()
			dest := filepath.Join(base, "out")
			err := gitrepo.ExportTree(context.Background(), dir, hash, dest)
			if !errors.Is(err, gitrepo.ErrUnsafePath) {
				t.Fatalf("err = %v, want ErrUnsafePath", err)
			}
			if _, err := os.Stat(filepath.Join(base, "pwned")); err == nil {
				t.Fatal("a file was written outside the destination")
			}
		})
	}
}
