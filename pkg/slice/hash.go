package slice

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
)

// The content hash is computed here, not in the compiler, so that the hub
// that records it and the agent that checks its checkout against it use one
// implementation.

// ErrOutsideRepo reports a source, chart or kustomize reference that leaves
// the repo root.
var ErrOutsideRepo = errors.New("path leaves the repo")

// ErrSourceStale reports a unit whose files in the checkout do not hash to
// the hash its slice records: sources were changed without re-rendering,
// so what would be applied was never reviewed.
var ErrSourceStale = errors.New("unit sources do not match the slice's hash")

// Input is a repo path, besides the unit directory, whose content a unit's
// Hash covers.
type Input struct {
	Path string `json:"path"`
	// Except is a top-level entry of the directory Path left out of the
	// hash (an application's app.yaml, whose effect is in the unit's
	// generated files).
	Except string `json:"except,omitempty"`
}

// File is one generated file of a unit directory.
type File struct {
	Name string
	Data []byte
}

// TreeHasher hashes files and directory trees of a repo checkout, caching
// every directory's digest so that thousands of units sharing a source hash
// it once. Paths are slash-separated and relative to the repo root.
type TreeHasher struct {
	root string
	mu   sync.Mutex
	dirs map[string]string
}

// NewTreeHasher returns a hasher of the tree under root. Its cache assumes
// the tree does not change while it is used.
func NewTreeHasher(root string) *TreeHasher {
	return &TreeHasher{root: root, dirs: map[string]string{}}
}

// Root is the directory the hasher reads.
func (h *TreeHasher) Root() string { return h.root }

// HashPath returns the digest of a file or directory tree: for a directory,
// over each entry's name, type and digest, sorted by name, so renames,
// mode changes (executable bit) and content changes all change it.
func (h *TreeHasher) HashPath(rel string) (string, error) {
	fi, err := os.Lstat(filepath.Join(h.root, filepath.FromSlash(rel)))
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", rel, err)
	}
	return h.hashEntry(rel, fi)
}

func (h *TreeHasher) hashEntry(rel string, fi fs.FileInfo) (string, error) {
	switch {
	case fi.IsDir():
		return h.HashDirExcept(rel, "")
	case fi.Mode()&fs.ModeSymlink != 0:
		// A link is hashed by its target text; a link leaving the repo would
		// make the render read outside it, so it is refused.
		target, err := os.Readlink(filepath.Join(h.root, filepath.FromSlash(rel)))
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", rel, err)
		}
		if filepath.IsAbs(target) || !inRepo(path.Join(path.Dir(rel), filepath.ToSlash(target))) {
			return "", fmt.Errorf("symlink %s -> %s: %w", rel, target, ErrOutsideRepo)
		}
		sum := sha256.Sum256([]byte("l " + filepath.ToSlash(target)))
		return hex.EncodeToString(sum[:]), nil
	case fi.Mode().IsRegular():
		return h.hashFile(rel, fi.Mode()&0o111 != 0)
	default:
		return "", fmt.Errorf("hash %s: not a regular file, directory or symlink", rel)
	}
}

func (h *TreeHasher) hashFile(rel string, exec bool) (string, error) {
	f, err := os.Open(filepath.Join(h.root, filepath.FromSlash(rel)))
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", rel, err)
	}
	defer f.Close()
	d := sha256.New()
	if exec {
		d.Write([]byte("x "))
	} else {
		d.Write([]byte("f "))
	}
	if _, err := io.Copy(d, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", rel, err)
	}
	return hex.EncodeToString(d.Sum(nil)), nil
}

// HashDirExcept hashes a directory tree leaving out the top-level entry
// named skip (when not empty). With skip set, a missing directory hashes
// as an empty one: a published slice leaves skip out, and with it a
// directory that holds nothing else (gitrepo.CutSlices), which hashes the
// same in main.
func (h *TreeHasher) HashDirExcept(rel, skip string) (string, error) {
	key := rel
	if skip != "" {
		key = rel + "\x00" + skip
	}
	h.mu.Lock()
	sum, ok := h.dirs[key]
	h.mu.Unlock()
	if ok {
		return sum, nil
	}
	entries, err := os.ReadDir(filepath.Join(h.root, filepath.FromSlash(rel)))
	if err != nil && !(skip != "" && errors.Is(err, fs.ErrNotExist)) {
		return "", fmt.Errorf("hash %s: %w", rel, err)
	}
	d := sha256.New()
	d.Write([]byte("d\n"))
	for _, e := range entries { // ReadDir sorts by name
		if e.Name() == skip {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", path.Join(rel, e.Name()), err)
		}
		child, err := h.hashEntry(path.Join(rel, e.Name()), fi)
		if err != nil {
			return "", err
		}
		writeField(d, e.Name())
		writeField(d, child)
	}
	sum = hex.EncodeToString(d.Sum(nil))
	h.mu.Lock()
	h.dirs[key] = sum
	h.mu.Unlock()
	return sum, nil
}

// InputsDigest hashes a unit's inputs, in order; it is "" for none.
func (h *TreeHasher) InputsDigest(inputs []Input) (string, error) {
	return h.InputsDigestAt(inputs, nil)
}

// InputsDigestAt is InputsDigest of the inputs' content as it will be once
// copied to at(path) (nil: where it is), so the hub can hash a snapshot
// before writing it.
func (h *TreeHasher) InputsDigestAt(inputs []Input, at func(string) string) (string, error) {
	if len(inputs) == 0 {
		return "", nil
	}
	d := sha256.New()
	for _, in := range inputs {
		if !inRepo(in.Path) {
			return "", fmt.Errorf("input %s: %w", in.Path, ErrOutsideRepo)
		}
		var sum string
		var err error
		if in.Except != "" {
			sum, err = h.HashDirExcept(in.Path, in.Except)
		} else {
			sum, err = h.HashPath(in.Path)
		}
		if err != nil {
			return "", err
		}
		p := in.Path
		if at != nil {
			p = at(p)
		}
		writeField(d, p)
		writeField(d, sum)
	}
	return hex.EncodeToString(d.Sum(nil)), nil
}

// UnitHash is a unit's content hash, "sha256:<hex>", over its directory's
// files (by name) and the digest of its inputs (InputsDigest).
func UnitHash(files []File, inputsDigest string) string {
	fs := append([]File(nil), files...)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	d := sha256.New()
	writeField(d, "flotilla-unit-v1")
	for _, f := range fs {
		sum := sha256.Sum256(f.Data)
		writeField(d, f.Name)
		writeField(d, hex.EncodeToString(sum[:]))
	}
	writeField(d, inputsDigest)
	return "sha256:" + hex.EncodeToString(d.Sum(nil))
}

// CheckHash computes u's content hash from the checkout h reads — its unit
// directory's files and its Inputs, as the hub hashed them — and returns an
// error wrapping ErrSourceStale when it differs from u.Hash. It reads only
// what rendering the unit reads anyway.
func CheckHash(h *TreeHasher, u Unit) error {
	if !inRepo(u.Path) {
		return fmt.Errorf("unit %s: %s: %w", u.Name, u.Path, ErrOutsideRepo)
	}
	dir := filepath.Join(h.root, filepath.FromSlash(u.Path))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("unit %s: %w", u.Name, err)
	}
	files := make([]File, 0, len(entries))
	for _, e := range entries {
		if !e.Type().IsRegular() {
			// The hub writes only regular files here; anything else is
			// not what it hashed.
			return fmt.Errorf("unit %s: %s is not a regular file: %w", u.Name, path.Join(u.Path, e.Name()), ErrSourceStale)
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("unit %s: %w", u.Name, err)
		}
		files = append(files, File{Name: e.Name(), Data: data})
	}
	digest, err := h.InputsDigest(u.Inputs)
	if err != nil {
		return fmt.Errorf("unit %s: %w", u.Name, err)
	}
	if got := UnitHash(files, digest); got != u.Hash {
		return fmt.Errorf("unit %s: checkout hashes to %s, slice says %s: %w", u.Name, got, u.Hash, ErrSourceStale)
	}
	return nil
}

// writeField writes a length-prefixed string so that concatenations cannot
// collide.
func writeField(w hash.Hash, s string) {
	fmt.Fprintf(w, "%d:%s\n", len(s), s)
}
