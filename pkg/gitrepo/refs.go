package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
	"github.com/go-git/go-git/v5/storage/memory"
)

// ReadOptions configure ReadRefs.
type ReadOptions struct {
	Auth    Auth
	Timeout time.Duration // per network operation; DefaultTimeout when zero
	// CacheDir keeps a bare object store between calls (e.g. for --watch):
	// unchanged refs are then not fetched again. In memory when empty.
	CacheDir string
	// File is the path whose content is returned for every ref
	// (e.g. "status.yaml"); none when empty.
	File string
	// MaxFileSize bounds that content; 1 MiB when zero.
	MaxFileSize int64
}

// RefFiles describes the head commit of one ref.
type RefFiles struct {
	Ref string // full name, e.g. refs/heads/flotilla/status/member1
	// Commit is the head commit; Committer.When is the commit time.
	Commit
	// Changed lists the paths the head commit changed against its first
	// parent (every path for a root commit, or when the parent is beyond a
	// shallow clone's boundary), sorted.
	Changed []string
	// File is the content of ReadOptions.File at the head; FileFound is
	// false when the head has no such file.
	File      []byte
	FileFound bool
	// ParentFile is that file in the head's first parent, when the parent
	// is present (not a root commit, not beyond a shallow boundary), so a
	// reader can tell what changed hands between the last two commits.
	ParentFile      []byte
	ParentFileFound bool
}

// ReadRefs reads every ref whose name starts with prefix (e.g.
// "refs/heads/flotilla/status/"). remote is a URL, fetched from with
// ls-remote first and then only the refs that changed (depth 2, so each
// head's parent is there to diff against); or a local repository
// directory, read in place (its refs as they are: in a clone made by the
// git CLI, other branches are under refs/remotes/origin/). The result is
// sorted by ref name; no refs under prefix is an empty result, not an error.
func ReadRefs(ctx context.Context, remote, prefix string, opts ReadOptions) ([]RefFiles, error) {
	if !strings.HasPrefix(prefix, "refs/") {
		return nil, fmt.Errorf("read refs: prefix %q must start with refs/", prefix)
	}
	if fi, err := os.Stat(remote); err == nil && fi.IsDir() {
		return readRepoDir(ctx, remote, prefix, opts)
	}
	ep, err := opts.Auth.endpoint(remote, timeoutOr(opts.Timeout))
	if err != nil {
		return nil, err
	}
	read := func(st storage.Storer) ([]RefFiles, error) {
		if err := syncRefs(ctx, st, ep, opts.Timeout, prefix); err != nil {
			return nil, err
		}
		return readLocalRefs(ctx, st, prefix, opts)
	}
	if opts.CacheDir == "" {
		return read(memory.NewStorage())
	}
	r, err := openCache(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	refs, err := read(r.Storer)
	if err == nil || isTransportError(err) || ctx.Err() != nil {
		return refs, err
	}
	// The cache is damaged, or a shallow fetch into it left out an object
	// a ref needs (seen when refs move during the fetch): start it again
	// once.
	if rmErr := os.RemoveAll(opts.CacheDir); rmErr != nil {
		return nil, errors.Join(err, rmErr)
	}
	if r, err = openCache(opts.CacheDir); err != nil {
		return nil, err
	}
	return read(r.Storer)
}

// syncRefs makes st's refs under prefix equal the remote's: lists them,
// fetches those that differ, deletes those gone.
func syncRefs(ctx context.Context, st storage.Storer, ep *endpoint, timeout time.Duration, prefix string) error {
	remote, err := listRefs(ctx, ep, timeout)
	if err != nil {
		return err
	}
	local := map[string]plumbing.Hash{}
	// A local ref the listing could not read is fetched again.
	have, _ := hashRefs(st, prefix)
	for _, r := range have {
		local[r.Name().String()] = r.Hash()
	}
	var specs []config.RefSpec
	wanted := 0
	for name, h := range remote {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		wanted++
		if local[name] != h {
			specs = append(specs, config.RefSpec("+"+name+":"+name))
		}
	}
	for name := range local {
		if _, ok := remote[name]; !ok {
			if err := st.RemoveReference(plumbing.ReferenceName(name)); err != nil {
				return err
			}
		}
	}
	if len(specs) == 0 {
		return nil
	}
	if len(specs) > wanted/2 {
		// Most refs changed (a cold cache): one wildcard beats N specs.
		specs = []config.RefSpec{config.RefSpec("+" + prefix + "*:" + prefix + "*")}
	}
	err = fetchInto(ctx, st, ep, timeout, specs, 2)
	if errors.Is(err, ErrRefNotFound) {
		return nil // deleted between ls-remote and fetch
	}
	return err
}

// readRepoDir reads a repository directory in place, while other processes
// may push to it. go-git reads the lock file git writes beside a ref it
// updates as one more ref; while that file is new it is empty, and the
// whole listing fails (dotgit.ErrEmptyRefFile): such a read is tried again.
func readRepoDir(ctx context.Context, dir, prefix string, opts ReadOptions) ([]RefFiles, error) {
	const attempts = 5
	pause := Backoff{Initial: 50 * time.Millisecond, Max: time.Second}
	for attempt := 1; ; attempt++ {
		r, err := openLocal(dir)
		if err != nil {
			return nil, err
		}
		refs, err := readLocalRefs(ctx, r.Storer, prefix, opts)
		if !errors.Is(err, dotgit.ErrEmptyRefFile) || attempt == attempts {
			return refs, err
		}
		if err := pause.Wait(ctx, attempt-1); err != nil {
			return nil, err
		}
	}
}

// hashRefs lists st's hash refs under prefix, sorted by name. A name
// ending in .lock is the lock file git writes beside a ref it updates in a
// repository directory, never a ref (git check-ref-format).
func hashRefs(st storer.ReferenceStorer, prefix string) ([]*plumbing.Reference, error) {
	iter, err := st.IterReferences()
	if err != nil {
		return nil, err
	}
	var refs []*plumbing.Reference
	err = iter.ForEach(func(r *plumbing.Reference) error {
		if name := r.Name().String(); strings.HasPrefix(name, prefix) && !strings.HasSuffix(name, ".lock") && r.Type() == plumbing.HashReference {
			refs = append(refs, r)
		}
		return nil
	})
	sort.Slice(refs, func(i, j int) bool { return refs[i].Name() < refs[j].Name() })
	return refs, err
}

func readLocalRefs(ctx context.Context, st storage.Storer, prefix string, opts ReadOptions) ([]RefFiles, error) {
	refs, err := hashRefs(st, prefix)
	if err != nil {
		return nil, err
	}
	limit := opts.MaxFileSize
	if limit <= 0 {
		limit = 1 << 20
	}
	out := make([]RefFiles, 0, len(refs))
	for _, ref := range refs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rf, err := readRef(ctx, st, ref, opts.File, limit)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", ref.Name(), err)
		}
		out = append(out, rf)
	}
	return out, nil
}

func readRef(ctx context.Context, st storage.Storer, ref *plumbing.Reference, file string, limit int64) (RefFiles, error) {
	c, err := object.GetCommit(st, ref.Hash())
	if err != nil {
		return RefFiles{}, err
	}
	cc, err := newCommit(c)
	if err != nil {
		return RefFiles{}, err
	}
	rf := RefFiles{Ref: ref.Name().String(), Commit: cc}
	var parent *object.Commit
	if len(c.ParentHashes) > 0 {
		parent, err = object.GetCommit(st, c.ParentHashes[0])
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			parent = nil // beyond a shallow boundary: compare with nothing
		} else if err != nil {
			return RefFiles{}, fmt.Errorf("parent of %s: %w", c.Hash, err)
		}
	}
	if rf.Changed, err = changedBetween(ctx, parent, c); err != nil {
		return RefFiles{}, err
	}
	if file != "" {
		if rf.File, rf.FileFound, err = fileAt(st, c, file, limit); err != nil {
			return RefFiles{}, err
		}
		if parent != nil {
			// Only a hint for the reader: a parent it cannot read (too
			// large) reads as absent rather than failing the ref.
			if data, found, err := fileAt(st, parent, file, limit); err == nil {
				rf.ParentFile, rf.ParentFileFound = data, found
			}
		}
	}
	return rf, nil
}

// fileAt reads file from c's tree, bounded by limit (see readBlob); found
// is false when the tree has no such regular file.
func fileAt(st storage.Storer, c *object.Commit, file string, limit int64) ([]byte, bool, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, false, err
	}
	entry, err := tree.FindEntry(file)
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !entry.Mode.IsFile() {
		return nil, false, nil
	}
	data, err := readBlob(st, entry.Hash, limit)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", file, err)
	}
	return data, true, nil
}
