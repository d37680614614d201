package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// openLocal opens the repository containing dir (a work tree, a
// subdirectory of one, or a bare repository).
func openLocal(dir string) (*git.Repository, error) {
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		r, err = git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	}
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	return r, nil
}

// resolveCommit resolves rev (branch, tag, remote branch, full or short
// hash, or any go-git revision expression) to a commit, peeling tags.
func resolveCommit(r *git.Repository, rev string) (*object.Commit, error) {
	h, err := r.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("resolve %q: %w: %w", rev, ErrRevisionNotFound, err)
	}
	return peelToCommit(r.Storer, *h, rev)
}

// peelToCommit returns the commit h names, following tag objects; rev
// names h in messages.
func peelToCommit(s storer.EncodedObjectStorer, h plumbing.Hash, rev string) (*object.Commit, error) {
	for range 10 { // tags of tags, bounded
		obj, err := s.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return nil, fmt.Errorf("resolve %q: %w: %w", rev, ErrRevisionNotFound, err)
		}
		switch obj.Type() {
		case plumbing.CommitObject:
			return object.DecodeCommit(s, obj)
		case plumbing.TagObject:
			tag, err := object.DecodeTag(s, obj)
			if err != nil {
				return nil, err
			}
			h = tag.Target
		default:
			return nil, fmt.Errorf("resolve %q: %w: %s is a %s", rev, ErrRevisionNotFound, h, obj.Type())
		}
	}
	return nil, fmt.Errorf("resolve %q: %w: tag chain too long", rev, ErrRevisionNotFound)
}

// ResolveRevision resolves rev (branch, tag, remote branch such as
// origin/main, full or abbreviated hash) in the local repository at repoDir
// to a full commit hash.
func ResolveRevision(repoDir, rev string) (string, error) {
	r, err := openLocal(repoDir)
	if err != nil {
		return "", err
	}
	c, err := resolveCommit(r, rev)
	if err != nil {
		return "", err
	}
	return c.Hash.String(), nil
}

// ExportTree writes the tree of rev in the local repository at repoDir into
// destDir, which must not exist or be empty. Regular files keep their
// executable bit, symlinks are written as symlinks with their target
// unchanged (deciding whether a target is acceptable is the reader's job),
// submodules are skipped. Writes go through a BoundOS filesystem and every
// entry name is checked, so a hostile tree cannot write outside destDir
// (go-git CVE-2023-49569).
func ExportTree(ctx context.Context, repoDir, rev, destDir string) error {
	return ExportPaths(ctx, repoDir, rev, destDir, nil)
}

func prepareEmptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("export destination %s is not empty", dir)
	}
	return nil
}

// ChangedFiles lists the paths that differ between the trees of the
// revisions from and to in the local repository at repoDir (added, removed
// or modified; renames show both paths), sorted.
func ChangedFiles(ctx context.Context, repoDir, from, to string) ([]string, error) {
	r, err := openLocal(repoDir)
	if err != nil {
		return nil, err
	}
	a, err := resolveCommit(r, from)
	if err != nil {
		return nil, err
	}
	b, err := resolveCommit(r, to)
	if err != nil {
		return nil, err
	}
	return changedBetween(ctx, a, b)
}

func changedBetween(ctx context.Context, a, b *object.Commit) ([]string, error) {
	var ta *object.Tree
	if a != nil {
		var err error
		if ta, err = a.Tree(); err != nil {
			return nil, fmt.Errorf("tree of %s: %w", a.Hash, err)
		}
	}
	tb, err := b.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", b.Hash, err)
	}
	changes, err := object.DiffTreeWithOptions(ctx, ta, tb, &object.DiffTreeOptions{})
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", b.Hash, err)
	}
	seen := map[string]bool{}
	var out []string
	for _, ch := range changes {
		for _, name := range []string{ch.From.Name, ch.To.Name} {
			if name != "" && !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// pathFilter selects subtrees to export; nil selects everything. A path
// given with a leading "!" (PathExclude) is left out of the subtree that
// holds it.
type pathFilter []string

// PathExclude marks a path of a selection that is left out of the
// selected directory holding it ("!apps/web/app.yaml").
const PathExclude = "!"

func newPathFilter(paths []string) (pathFilter, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	var f pathFilter
	whole := false
	for _, p := range paths {
		excluded := strings.HasPrefix(p, PathExclude)
		c := path.Clean(strings.Trim(strings.TrimPrefix(p, PathExclude), "/"))
		if c == ".." || strings.HasPrefix(c, "../") {
			return nil, fmt.Errorf("%w: %q", ErrUnsafePath, p)
		}
		switch {
		case excluded && (c == "." || c == ""):
			return nil, fmt.Errorf("%w: %q leaves out the whole tree", ErrUnsafePath, p)
		case excluded:
			f = append(f, PathExclude+c)
		case c == "." || c == "":
			whole = true
		default:
			f = append(f, c)
		}
	}
	if whole {
		return nil, nil // the whole tree
	}
	sort.Strings(f)
	return f, nil
}

// match is where a path stands in a filter.
type match struct {
	covered  bool // inside a selected subtree, exclusions aside
	excluded bool // an excluded path, or inside one
	holds    bool // a directory holding an excluded path
	leads    bool // a directory holding a selected subtree
}

// match scans the filter once for p.
func (f pathFilter) match(p string) match {
	var m match
	for _, s := range f {
		if x, ok := strings.CutPrefix(s, PathExclude); ok {
			m.excluded = m.excluded || p == x || strings.HasPrefix(p, x+"/")
			m.holds = m.holds || strings.HasPrefix(x, p+"/")
			continue
		}
		m.covered = m.covered || p == s || strings.HasPrefix(p, s+"/")
		m.leads = m.leads || strings.HasPrefix(s, p+"/")
	}
	return m
}

// includes reports whether p is inside a selected subtree, whole: none of
// it is excluded.
func (f pathFilter) includes(p string) bool {
	if f == nil {
		return true
	}
	m := f.match(p)
	return m.covered && !m.excluded && !m.holds
}

// leadsTo reports whether directory p contains a selected subtree, or is
// selected with a part of it excluded.
func (f pathFilter) leadsTo(p string) bool {
	m := f.match(p)
	return m.leads || m.covered && !m.excluded && m.holds
}

// validEntryName rejects tree entry names that could escape their directory
// or plant a .git directory, whatever the tree claims.
func validEntryName(name string) bool {
	return name != "" && name != "." && name != ".." &&
		!strings.ContainsAny(name, "/\x00") && !strings.EqualFold(name, ".git")
}

// writeTree writes tree into destDir through a BoundOS filesystem.
func writeTree(ctx context.Context, s storer.EncodedObjectStorer, tree *object.Tree, destDir string, filter pathFilter) error {
	fs := osfs.New(destDir, osfs.WithBoundOS())
	return writeTreeAt(ctx, s, tree, fs, "", filter)
}

func writeTreeAt(ctx context.Context, s storer.EncodedObjectStorer, tree *object.Tree, fs billy.Filesystem, dir string, filter pathFilter) error {
	for _, e := range tree.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !validEntryName(e.Name) {
			return fmt.Errorf("%w: tree entry %q in %q", ErrUnsafePath, e.Name, dir)
		}
		p := e.Name
		if dir != "" {
			p = dir + "/" + e.Name
		}
		if e.Mode == filemode.Dir {
			if !filter.includes(p) && !filter.leadsTo(p) {
				continue
			}
			sub, err := object.GetTree(s, e.Hash)
			if err != nil {
				return fmt.Errorf("tree %s: %w", p, err)
			}
			if err := fs.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := writeTreeAt(ctx, s, sub, fs, p, filter); err != nil {
				return err
			}
			continue
		}
		if !filter.includes(p) {
			continue
		}
		if err := writeEntry(s, fs, p, e); err != nil {
			return err
		}
	}
	return nil
}

func writeEntry(s storer.EncodedObjectStorer, fs billy.Filesystem, p string, e object.TreeEntry) error {
	var perm os.FileMode
	switch e.Mode {
	case filemode.Regular, filemode.Deprecated:
		perm = 0o644
	case filemode.Executable:
		perm = 0o755
	case filemode.Symlink:
		target, err := readBlob(s, e.Hash, 4096)
		if err != nil {
			return fmt.Errorf("symlink %s: %w", p, err)
		}
		return fs.Symlink(string(target), p)
	case filemode.Submodule:
		return nil // a gitlink has no content in this repository
	default:
		return fmt.Errorf("%s: unsupported file mode %s", p, e.Mode)
	}
	blob, err := object.GetBlob(s, e.Hash)
	if err != nil {
		return fmt.Errorf("blob %s: %w", p, err)
	}
	rd, err := blob.Reader()
	if err != nil {
		return fmt.Errorf("blob %s: %w", p, err)
	}
	defer rd.Close()
	// O_EXCL: never write through something already there.
	f, err := fs.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rd); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	return f.Close()
}

var errTooLarge = errors.New("object too large")

func readBlob(s storer.EncodedObjectStorer, h plumbing.Hash, limit int64) ([]byte, error) {
	blob, err := object.GetBlob(s, h)
	if err != nil {
		return nil, err
	}
	if limit > 0 && blob.Size > limit {
		return nil, fmt.Errorf("%w: %d bytes", errTooLarge, blob.Size)
	}
	rd, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}
