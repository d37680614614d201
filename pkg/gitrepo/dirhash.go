package gitrepo

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// DirTreeHash is the Git tree hash dir's content would have if committed:
// regular files (executable or not), symlinks (their target) and
// directories; empty directories are left out, as Git leaves them out.
// Anything else (a device, a socket) is an error. A directory FetchTree
// wrote hashes to its TreeResult.Tree until someone changes it, so a
// vendored copy is checked without the network.
func DirTreeHash(dir string) (string, error) {
	h, empty, err := dirTree(memory.NewStorage(), dir, ".")
	if err != nil {
		return "", fmt.Errorf("tree hash of %s: %w", dir, err)
	}
	if empty {
		return emptyTreeHash(), nil
	}
	return h.String(), nil
}

func emptyTreeHash() string {
	obj := memory.NewStorage().NewEncodedObject()
	_ = (&object.Tree{}).Encode(obj)
	return obj.Hash().String()
}

// dirTree stores the tree of dir/rel in st and returns its hash; empty
// reports a tree with no entries, which its parent leaves out.
func dirTree(st *memory.Storage, dir, rel string) (plumbing.Hash, bool, error) {
	full := filepath.Join(dir, filepath.FromSlash(rel))
	entries, err := os.ReadDir(full)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	var tree object.Tree
	for _, e := range entries {
		p := filepath.Join(full, e.Name())
		child := e.Name()
		if rel != "." {
			child = rel + "/" + e.Name()
		}
		var te object.TreeEntry
		switch t := e.Type(); {
		case e.IsDir():
			h, empty, err := dirTree(st, dir, child)
			if err != nil {
				return plumbing.ZeroHash, false, err
			}
			if empty {
				continue
			}
			te = object.TreeEntry{Name: e.Name(), Mode: filemode.Dir, Hash: h}
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return plumbing.ZeroHash, false, err
			}
			te = object.TreeEntry{Name: e.Name(), Mode: filemode.Symlink, Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(filepath.ToSlash(target)))}
		case t.IsRegular():
			fi, err := e.Info()
			if err != nil {
				return plumbing.ZeroHash, false, err
			}
			h, err := fileBlobHash(p, fi.Size())
			if err != nil {
				return plumbing.ZeroHash, false, err
			}
			mode := filemode.Regular
			if fi.Mode().Perm()&0o111 != 0 {
				mode = filemode.Executable
			}
			te = object.TreeEntry{Name: e.Name(), Mode: mode, Hash: h}
		default:
			return plumbing.ZeroHash, false, fmt.Errorf("%s: unexpected file type %s", child, t)
		}
		tree.Entries = append(tree.Entries, te)
	}
	if len(tree.Entries) == 0 {
		return plumbing.ZeroHash, true, nil
	}
	h, err := storeEntries(st, tree.Entries)
	return h, false, err
}

// fileBlobHash hashes a file as a Git blob, streaming its content.
func fileBlobHash(p string, size int64) (plumbing.Hash, error) {
	f, err := os.Open(p)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer f.Close()
	h := plumbing.NewHasher(plumbing.BlobObject, size)
	n, err := io.Copy(h, f)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if n != size {
		return plumbing.ZeroHash, fmt.Errorf("%s changed while hashing", p)
	}
	return h.Sum(), nil
}
