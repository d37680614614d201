package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// openCache opens (or creates) the bare object store of a cache. Its
// filesystem is BoundOS, so nothing the remote sends can write outside it.
func openCache(dir string) (*git.Repository, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	st := filesystem.NewStorage(osfs.New(dir, osfs.WithBoundOS()), cache.NewObjectLRUDefault())
	r, err := git.Open(st, nil)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		r, err = git.Init(st, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	return r, nil
}

// maxPacks is how many packs a cache collects before it is compacted.
var maxPacks = 8

// compactIfNeeded rewrites the cache to one pack holding only what commit
// needs, once fetches have piled up packs full of superseded objects. The
// new store is built beside the old one and swapped in by rename.
func compactIfNeeded(dir string, repo *git.Repository, ref plumbing.ReferenceName, commit *object.Commit, keep ...plumbing.Hash) error {
	packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if len(packs) <= maxPacks {
		return nil
	}
	next := dir + ".compact"
	if err := os.RemoveAll(next); err != nil {
		return err
	}
	nr, err := openCache(next)
	if err != nil {
		return err
	}
	hashes := []plumbing.Hash{commit.Hash}
	for _, h := range keep {
		if h != commit.Hash {
			hashes = append(hashes, h)
		}
	}
	tree, err := commit.Tree()
	if err != nil {
		return err
	}
	seen := map[plumbing.Hash]bool{}
	var walk func(t *object.Tree) error
	walk = func(t *object.Tree) error {
		if seen[t.Hash] {
			return nil
		}
		seen[t.Hash] = true
		hashes = append(hashes, t.Hash)
		for _, e := range t.Entries {
			switch {
			case e.Mode == filemode.Dir:
				sub, err := object.GetTree(repo.Storer, e.Hash)
				if err != nil {
					return err
				}
				if err := walk(sub); err != nil {
					return err
				}
			case e.Mode.IsFile() && !seen[e.Hash]:
				seen[e.Hash] = true
				hashes = append(hashes, e.Hash)
			}
		}
		return nil
	}
	if err := walk(tree); err != nil {
		return err
	}
	pw, ok := nr.Storer.(storer.PackfileWriter)
	if !ok {
		return errors.New("cache storage cannot write packs")
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		return err
	}
	if _, err := packfile.NewEncoder(w, repo.Storer, false).Encode(hashes, 0); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := nr.Storer.SetReference(plumbing.NewHashReference(ref, commit.Hash)); err != nil {
		return err
	}
	if len(commit.ParentHashes) > 0 {
		if err := nr.Storer.SetShallow([]plumbing.Hash{commit.Hash}); err != nil {
			return err
		}
	}
	old := dir + ".old"
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(next, dir); err != nil {
		return err
	}
	return os.RemoveAll(old)
}
