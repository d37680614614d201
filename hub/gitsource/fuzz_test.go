package gitsource

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadLock: any lock file content is read without a panic, and what
// is accepted is a SourceLock that survives writing and reading again.
func FuzzReadLock(f *testing.F) {
	f.Add([]byte("apiVersion: flotilla.dev/v1alpha1\nkind: SourceLock\nurl: https://git.example.com/a.git\nref:\n  branch: main\npath: deploy\ncommit: 0123456789abcdef0123456789abcdef01234567\ntree: 89abcdef0123456789abcdef0123456789abcdef\n"))
	f.Add([]byte("kind: SourceLock\nref: [x]\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, Dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, LockFile("a")), data, 0o644); err != nil {
			t.Fatal(err)
		}
		v := &vendorer{root: root}
		l, err := v.readLock(LockFile("a"))
		if err != nil || l == nil {
			return
		}
		r := Result{URL: l.URL, Ref: l.Ref, Path: l.Path, Commit: l.Commit, Tree: l.Tree, Lock: LockFile("b")}
		if err := v.writeLock(r); err != nil {
			t.Fatal(err)
		}
		again, err := v.readLock(LockFile("b"))
		if err != nil || *again != *l {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, l)
		}
	})
}
