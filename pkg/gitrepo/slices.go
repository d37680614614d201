package gitrepo

// Slice refs: per-cluster commits the hub cuts from a main commit, so an
// agent fetches about what it runs whatever the fleet's size.
//
// A slice commit's tree is main's tree pruned to the cluster's paths (its
// rendered/ directory and the sources its units reference): every kept
// file and directory is main's own object, so Git stores and sends shared
// sources once. Beside them, under SliceProofDir, it carries the proof that
// the pruned tree is part of a main commit: that commit's raw object
// ("commit", signature included) and main's raw tree objects of every
// directory the pruning went into ("<dir>/tree"). The agent recomputes
// their hashes, so it needs to trust neither the publisher nor the server:
// the commit must hash to the Flotilla-Source trailer, its tree to the root
// proof, and every entry of the pruned tree must be main's entry of the same
// name (same hash), or a pruned directory whose main counterpart is itself
// proven. The main commit's signature is then verified as on the branch.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
)

// SliceRefPrefix is where slice commits are published, one ref per cluster.
const SliceRefPrefix = "refs/flotilla/slices/"

// SliceRef is the ref of cluster's slice commits.
func SliceRef(cluster string) string { return SliceRefPrefix + cluster }

// SliceSourceTrailer names, in a slice commit's message, the main commit
// the slice was cut from.
const SliceSourceTrailer = "Flotilla-Source"

// SliceProofDir is the top-level directory of a slice commit holding the
// proof; it is not part of the agent's checkout.
const SliceProofDir = ".flotilla-source"

// ErrBadSlice: a slice commit is not a faithful part of the main commit it
// names (or names none).
var ErrBadSlice = errors.New("slice commit does not match its main commit")

// CutSlices writes, into the local repository repoDir, one slice commit per
// cluster cut from commit rev, and points SliceRef(cluster) at it (a child
// of the ref's previous commit, so agents fetch only what changed). paths
// maps a cluster to the repo paths (files or directories, slash-separated)
// its slice holds; a path prefixed with PathExclude is left out of the
// directory holding it, which the proof then carries like any directory
// the cut went into. The commits are deterministic: cutting the same rev
// again gives the same hashes. The slice refs of clusters not in paths are
// deleted. It returns cluster → slice commit hash.
func CutSlices(repoDir, rev string, paths map[string][]string) (map[string]string, error) {
	repo, err := git.PlainOpen(repoDir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", repoDir, err)
	}
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRevisionNotFound, rev, err)
	}
	main, err := repo.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRevisionNotFound, rev, err)
	}
	raw, err := rawObject(repo.Storer, plumbing.CommitObject, main.Hash)
	if err != nil {
		return nil, err
	}
	root, err := main.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", main.Hash, err)
	}
	if _, err := root.FindEntry(SliceProofDir); err == nil {
		return nil, fmt.Errorf("%s: %w: the tree has a top-level %s", main.Hash, ErrBadSlice, SliceProofDir)
	}
	// New objects are staged in memory and written as one pack before any
	// ref moves: tens of thousands of loose object files cost more than
	// the cut, and a failed cut leaves the refs as they were.
	st := newStagedObjects(repo.Storer)
	commitBlob, err := storeBlob(st, raw)
	if err != nil {
		return nil, err
	}
	clusters := make([]string, 0, len(paths))
	for c := range paths {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	out := map[string]string{}
	var moved []*plumbing.Reference
	// Main's directories shared by many slices are copied into a proof
	// blob once.
	proofBlobs := map[plumbing.Hash]plumbing.Hash{}
	// The previous slice commits, read once: looking each ref up would
	// parse packed-refs (every status ref of the fleet) once per cluster.
	prevs := map[plumbing.ReferenceName]plumbing.Hash{}
	locals, err := hashRefs(repo.Storer, SliceRefPrefix)
	if err != nil {
		return nil, err
	}
	for _, r := range locals {
		prevs[r.Name()] = r.Hash()
	}
	for _, cluster := range clusters {
		ref := plumbing.ReferenceName(SliceRef(cluster))
		if err := ref.Validate(); err != nil {
			return nil, fmt.Errorf("cluster %q: %w", cluster, err)
		}
		filter, err := newPathFilter(paths[cluster])
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cluster, err)
		}
		if filter == nil {
			return nil, fmt.Errorf("cluster %s: no paths, or the whole tree", cluster)
		}
		// The proof's files, by their path inside SliceProofDir.
		proofs := map[string]object.TreeEntry{"commit": {Mode: filemode.Regular, Hash: commitBlob}}
		cut, err := cutTree(st, root, "", filter, proofs, proofBlobs)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cluster, err)
		}
		proofTree, err := buildTree(st, proofs)
		if err != nil {
			return nil, err
		}
		entries := append(cut, object.TreeEntry{Name: SliceProofDir, Mode: filemode.Dir, Hash: proofTree})
		tree, err := storeEntries(st, entries)
		if err != nil {
			return nil, err
		}
		var parents []plumbing.Hash
		if prev, ok := prevs[ref]; ok {
			if pc, err := repo.CommitObject(prev); err == nil {
				if pc.TreeHash == tree {
					out[cluster] = pc.Hash.String()
					continue // already cut from this main commit
				}
				parents = []plumbing.Hash{pc.Hash}
			}
		}
		who := object.Signature{Name: "flotilla", Email: "flotilla@localhost", When: main.Committer.When}
		c := &object.Commit{
			Author: who, Committer: who, TreeHash: tree, ParentHashes: parents,
			Message: fmt.Sprintf("slice %s of %s\n\n%s: %s\n", cluster, main.Hash, SliceSourceTrailer, main.Hash),
		}
		obj := st.NewEncodedObject()
		if err := c.Encode(obj); err != nil {
			return nil, err
		}
		ch, err := st.SetEncodedObject(obj)
		if err != nil {
			return nil, err
		}
		moved = append(moved, plumbing.NewHashReference(ref, ch))
		out[cluster] = ch.String()
	}
	if err := st.writePack(); err != nil {
		return nil, fmt.Errorf("store the slices: %w", err)
	}
	for _, r := range moved {
		if err := repo.Storer.SetReference(r); err != nil {
			return nil, err
		}
	}
	// A cluster that left the fleet has no slice any more.
	for name := range prevs {
		if _, ok := paths[strings.TrimPrefix(name.String(), SliceRefPrefix)]; !ok {
			if err := repo.Storer.RemoveReference(name); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// cutTree returns t's entries (t is directory dir of main's tree) kept by
// filter: selected entries as they are, directories leading to a selected
// path pruned recursively. Every directory it descends into adds its raw
// tree object to proofs.
func cutTree(st storer.EncodedObjectStorer, t *object.Tree, dir string, filter pathFilter, proofs map[string]object.TreeEntry, blobs map[plumbing.Hash]plumbing.Hash) ([]object.TreeEntry, error) {
	blob, ok := blobs[t.Hash]
	if !ok {
		raw, err := rawObject(st, plumbing.TreeObject, t.Hash)
		if err != nil {
			return nil, err
		}
		if blob, err = storeBlob(st, raw); err != nil {
			return nil, err
		}
		blobs[t.Hash] = blob
	}
	// Named by the directory's path in hex: unique whatever main's names,
	// and stable, so that Git deltas a directory's proof against its last.
	proofs["trees/d"+hex.EncodeToString([]byte(dir))] = object.TreeEntry{Mode: filemode.Regular, Hash: blob}
	var out []object.TreeEntry
	for _, e := range t.Entries {
		p := path.Join(dir, e.Name)
		switch {
		case filter.includes(p):
			out = append(out, e)
		case e.Mode == filemode.Dir && filter.leadsTo(p):
			sub, err := object.GetTree(st, e.Hash)
			if err != nil {
				return nil, fmt.Errorf("tree %s: %w", p, err)
			}
			kept, err := cutTree(st, sub, p, filter, proofs, blobs)
			if err != nil {
				return nil, err
			}
			if len(kept) > 0 {
				h, err := storeEntries(st, kept)
				if err != nil {
					return nil, err
				}
				out = append(out, object.TreeEntry{Name: e.Name, Mode: filemode.Dir, Hash: h})
			}
		}
	}
	return out, nil
}

// storeEntries stores a tree of entries, sorted in Git's order (by name, a
// tree's name compared as if it ended in "/").
func storeEntries(st storer.EncodedObjectStorer, entries []object.TreeEntry) (plumbing.Hash, error) {
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.SliceStable(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	t := &object.Tree{Entries: entries}
	obj := st.NewEncodedObject()
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return st.SetEncodedObject(obj)
}

func storeBlob(st storer.EncodedObjectStorer, content []byte) (plumbing.Hash, error) {
	obj, err := newRawObject(st, plumbing.BlobObject, content)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return st.SetEncodedObject(obj)
}

// newRawObject is an object of type t holding content (what rawObject
// reads back), not yet stored.
func newRawObject(st storer.EncodedObjectStorer, t plumbing.ObjectType, content []byte) (plumbing.EncodedObject, error) {
	obj := st.NewEncodedObject()
	obj.SetType(t)
	obj.SetSize(int64(len(content)))
	w, err := obj.Writer()
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(content); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return obj, nil
}

// rawObject is an object's content as Git hashes it (without the header).
func rawObject(st storer.EncodedObjectStorer, t plumbing.ObjectType, h plumbing.Hash) ([]byte, error) {
	obj, err := st.EncodedObject(t, h)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", h, err)
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// maxProofBytes bounds what the proof of one slice commit may hold (the
// main commit and one raw tree per pruned directory: at 10,000 clusters
// about 10 KB).
const maxProofBytes = 16 << 20

// verifySlice checks that slice commit c is a faithful part of the main
// commit its trailer names, and stores that main commit's object in st (so
// that its signature can be verified like a branch head's). It returns the
// main commit.
func verifySlice(st storage.Storer, c *object.Commit) (*object.Commit, error) {
	src, ok := sliceSource(c.Message)
	if !ok {
		return nil, fmt.Errorf("%w: slice commit %s has no %s trailer", ErrBadSlice, c.Hash, SliceSourceTrailer)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", c.Hash, err)
	}
	pe, err := tree.FindEntry(SliceProofDir)
	if err != nil || pe.Mode != filemode.Dir {
		return nil, fmt.Errorf("%w: slice commit %s has no %s", ErrBadSlice, c.Hash, SliceProofDir)
	}
	proofTree, err := object.GetTree(st, pe.Hash)
	if err != nil {
		return nil, fmt.Errorf("proof of %s: %w", c.Hash, err)
	}
	var rawCommit []byte
	trees := map[plumbing.Hash][]byte{}
	total := 0
	err = proofTree.Files().ForEach(func(f *object.File) error {
		if total += int(f.Size); total > maxProofBytes {
			return fmt.Errorf("%w: the proof is larger than %d bytes", ErrBadSlice, maxProofBytes)
		}
		r, err := f.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if f.Name == "commit" {
			rawCommit = b
			return nil
		}
		trees[plumbing.ComputeHash(plumbing.TreeObject, b)] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("proof of %s: %w", c.Hash, err)
	}
	if rawCommit == nil || plumbing.ComputeHash(plumbing.CommitObject, rawCommit) != src {
		return nil, fmt.Errorf("%w: slice commit %s: the proof does not hold main commit %s", ErrBadSlice, c.Hash, src)
	}
	obj, err := newRawObject(st, plumbing.CommitObject, rawCommit)
	if err != nil {
		return nil, err
	}
	main, err := object.DecodeCommit(st, obj)
	if err != nil {
		return nil, fmt.Errorf("%w: main commit %s: %w", ErrBadSlice, src, err)
	}
	if err := matchTree(st, tree, main.TreeHash, "", trees); err != nil {
		return nil, fmt.Errorf("%w: slice commit %s against %s: %w", ErrBadSlice, c.Hash, src, err)
	}
	if _, err := st.SetEncodedObject(obj); err != nil {
		return nil, err
	}
	return main, nil
}

// matchTree checks slice directory t against main's tree want (whose raw
// object must be among the proven trees): every entry is main's, or a
// pruned directory matching main's recursively.
func matchTree(st storage.Storer, t *object.Tree, want plumbing.Hash, dir string, trees map[plumbing.Hash][]byte) error {
	raw, ok := trees[want]
	if !ok {
		return fmt.Errorf("no proof of directory %q", dir)
	}
	obj := &plumbing.MemoryObject{}
	obj.SetType(plumbing.TreeObject)
	obj.Write(raw)
	main := &object.Tree{}
	if err := main.Decode(obj); err != nil {
		return fmt.Errorf("proof of directory %q: %w", dir, err)
	}
	byName := make(map[string]object.TreeEntry, len(main.Entries))
	for _, e := range main.Entries {
		byName[e.Name] = e
	}
	for _, e := range t.Entries {
		if dir == "" && e.Name == SliceProofDir {
			continue
		}
		p := path.Join(dir, e.Name)
		m, ok := byName[e.Name]
		switch {
		case !ok || m.Mode != e.Mode:
			return fmt.Errorf("%s is not in the main commit", p)
		case m.Hash == e.Hash:
		case e.Mode == filemode.Dir:
			sub, err := object.GetTree(st, e.Hash)
			if err != nil {
				return fmt.Errorf("tree %s: %w", p, err)
			}
			if err := matchTree(st, sub, m.Hash, p, trees); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s differs from the main commit", p)
		}
	}
	return nil
}

// sliceSource reads the Flotilla-Source trailer.
func sliceSource(msg string) (plumbing.Hash, bool) {
	for _, line := range strings.Split(msg, "\n") {
		v, ok := strings.CutPrefix(line, SliceSourceTrailer+": ")
		if !ok {
			continue
		}
		h := plumbing.NewHash(strings.TrimSpace(v))
		if h.String() == strings.TrimSpace(v) && !h.IsZero() {
			return h, true
		}
	}
	return plumbing.ZeroHash, false
}
