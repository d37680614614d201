package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// TreeFile is a file of a commit's tree.
type TreeFile struct {
	// Path is slash-separated, from the root of the tree.
	Path string
	// Hash is the blob's object hash, as `git hash-object` computes it.
	Hash string
	// Executable and Symlink say what the entry is besides a regular file.
	Executable bool
	Symlink    bool
}

// ListTree lists the files under dir ("" for the whole tree) in the tree
// of rev in the local repository at repoDir, sorted by path, without
// reading any file's content: compare their hashes with BlobHash of
// generated content to find what differs without a checkout. A dir the
// tree does not have lists nothing; submodules are skipped.
func ListTree(ctx context.Context, repoDir, rev, dir string) ([]TreeFile, error) {
	r, st, err := openLocalForReading(repoDir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c, err := resolveCommit(r, rev)
	if err != nil {
		return nil, err
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", c.Hash, err)
	}
	dir = strings.Trim(path.Clean("/"+dir), "/")
	if dir != "" {
		tree, err = tree.Tree(dir)
		if errors.Is(err, object.ErrDirectoryNotFound) || errors.Is(err, object.ErrEntryNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tree %s of %s: %w", dir, c.Hash, err)
		}
	}
	var out []TreeFile
	var walk func(t *object.Tree, prefix string) error
	walk = func(t *object.Tree, prefix string) error {
		for _, e := range t.Entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			p := path.Join(prefix, e.Name)
			switch e.Mode {
			case filemode.Dir:
				sub, err := object.GetTree(st, e.Hash)
				if err != nil {
					return fmt.Errorf("tree %s: %w", p, err)
				}
				if err := walk(sub, p); err != nil {
					return err
				}
			case filemode.Submodule:
			default:
				out = append(out, TreeFile{Path: p, Hash: e.Hash.String(),
					Executable: e.Mode == filemode.Executable, Symlink: e.Mode == filemode.Symlink})
			}
		}
		return nil
	}
	if err := walk(tree, dir); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// BlobHash is the object hash Git gives data as a file's content.
func BlobHash(data []byte) string {
	return plumbing.ComputeHash(plumbing.BlobObject, data).String()
}

// ExportTreePaths is ExportTree limited to paths: slash-separated files or
// directories of the tree (a large generated directory can be left out by
// naming its siblings). Entries outside them are not written.
func ExportTreePaths(ctx context.Context, repoDir, rev, destDir string, paths []string) error {
	if len(paths) == 0 {
		return prepareEmptyDir(destDir)
	}
	filter, err := newPathFilter(paths)
	if err != nil {
		return err
	}
	r, st, err := openLocalForReading(repoDir)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := resolveCommit(r, rev)
	if err != nil {
		return err
	}
	tree, err := c.Tree()
	if err != nil {
		return fmt.Errorf("tree of %s: %w", c.Hash, err)
	}
	if err := prepareEmptyDir(destDir); err != nil {
		return err
	}
	return writeTree(ctx, st, tree, destDir, filter)
}

// openLocalForReading opens a local repository whose object storage keeps
// its pack files open: reading thousands of objects otherwise opens the
// pack once per object. Close the storage when done.
func openLocalForReading(dir string) (*git.Repository, *filesystem.Storage, error) {
	r, err := openLocal(dir)
	if err != nil {
		return nil, nil, err
	}
	fsStore, ok := r.Storer.(*filesystem.Storage)
	if !ok {
		return nil, nil, fmt.Errorf("open repository %s: unexpected storage %T", dir, r.Storer)
	}
	st := filesystem.NewStorageWithOptions(fsStore.Filesystem(), cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
	fast, err := git.Open(st, nil)
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	return fast, st, nil
}

// ReadBlobs reads blobs of the local repository at repoDir by hash (as
// ListTree gives them), in the order given: many small files of a large
// tree without walking it again.
func ReadBlobs(ctx context.Context, repoDir string, hashes []string) ([][]byte, error) {
	_, st, err := openLocalForReading(repoDir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	out := make([][]byte, len(hashes))
	for i, h := range hashes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := rawObject(st, plumbing.BlobObject, plumbing.NewHash(h))
		if err != nil {
			return nil, fmt.Errorf("%w: blob %s: %w", ErrRevisionNotFound, h, err)
		}
		out[i] = b
	}
	return out, nil
}
