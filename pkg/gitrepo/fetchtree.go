package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// ErrPathNotFound: a commit's tree has no directory at the requested path.
var ErrPathNotFound = errors.New("path not found in the commit")

// TreeRef names a commit of a remote: exactly one of Branch, Tag or Commit
// (a full hash).
type TreeRef struct {
	Branch string
	Tag    string
	Commit string
}

func (r TreeRef) String() string {
	switch {
	case r.Branch != "":
		return "branch " + r.Branch
	case r.Tag != "":
		return "tag " + r.Tag
	}
	return "commit " + r.Commit
}

// TreeLimits bound the subtree FetchTree writes; zero fields are no limit,
// except MaxFetchSize (zero is DefaultMaxFetchSize, as for Source).
type TreeLimits struct {
	MaxFetchSize int64
	MaxFileSize  int64
	MaxTotalSize int64
	MaxFiles     int
}

// TreeRequest is one subtree of one commit of a remote.
type TreeRequest struct {
	URL     string
	Auth    Auth
	Timeout time.Duration // per network operation; DefaultTimeout when zero
	// Commit is the full hash to fetch (a pin); Path the slash-separated
	// directory of its tree to write ("" or "." is the whole tree).
	Commit string
	Path   string
	// Dest must not exist or be empty; the subtree's content is written
	// into it.
	Dest   string
	Limits TreeLimits
}

// TreeResult says what FetchTree wrote.
type TreeResult struct {
	// Tree is the Git hash of the subtree, the value DirTreeHash gives
	// Dest while nobody changed it.
	Tree  string
	Files int
	Bytes int64
}

// ResolveRef lists the remote's refs (one ls-remote, no pack) and returns
// the commit ref names: a branch's head or the tag's target (annotated
// tags are peeled by fetching the tag alone). A Commit ref is checked for
// form only and returned as is. A missing branch or tag is ErrRefNotFound.
func ResolveRef(ctx context.Context, url string, auth Auth, timeout time.Duration, ref TreeRef) (string, error) {
	if ref.Commit != "" {
		if !isFullHash(ref.Commit) {
			return "", fmt.Errorf("commit %q: %w: want a full 40-character hash", ref.Commit, ErrRevisionNotFound)
		}
		return ref.Commit, nil
	}
	ep, err := auth.endpoint(url, timeoutOr(timeout))
	if err != nil {
		return "", err
	}
	refs, err := listRefs(ctx, ep, timeout)
	if err != nil {
		return "", err
	}
	name := plumbing.NewBranchReferenceName(ref.Branch)
	if ref.Tag != "" {
		name = plumbing.NewTagReferenceName(ref.Tag)
	}
	h, ok := refs[name.String()]
	if !ok {
		return "", fmt.Errorf("ls-remote %s: %w: %s", ep.redacted, ErrRefNotFound, ref)
	}
	if ref.Tag == "" {
		return h.String(), nil
	}
	// A tag may name a tag object; fetch it to find its commit.
	return withFetched(ctx, ep, timeout, h, 0, func(repo *git.Repository) (string, error) {
		c, err := peelToCommit(repo.Storer, h, ref.Tag)
		if err != nil {
			return "", err
		}
		return c.Hash.String(), nil
	})
}

// FetchTree fetches one commit of a remote (depth 1, into a temporary
// object store removed afterwards) and writes the subtree at Path into
// Dest, through the same checked writer as Source's checkouts. Before
// anything is written the whole subtree is checked: an entry name that
// could leave its directory is ErrUnsafePath, and so is a symlink whose
// target is absolute or leaves the subtree; a submodule, a file larger than
// MaxFileSize, more than MaxFiles files or MaxTotalSize bytes is refused
// (ErrTooLarge for the sizes). A pack larger than MaxFetchSize is
// ErrTooLarge too. On error Dest is left empty.
func FetchTree(ctx context.Context, req TreeRequest) (TreeResult, error) {
	if !isFullHash(req.Commit) {
		return TreeResult{}, fmt.Errorf("commit %q: %w: want a full 40-character hash", req.Commit, ErrRevisionNotFound)
	}
	sub := path.Clean("/" + req.Path)[1:]
	if strings.Contains("/"+req.Path+"/", "/../") {
		return TreeResult{}, fmt.Errorf("%w: path %q", ErrUnsafePath, req.Path)
	}
	ep, err := req.Auth.endpoint(req.URL, timeoutOr(req.Timeout))
	if err != nil {
		return TreeResult{}, err
	}
	if err := prepareEmptyDir(req.Dest); err != nil {
		return TreeResult{}, err
	}
	want := plumbing.NewHash(req.Commit)
	var res TreeResult
	_, err = withFetched(ctx, ep, req.Timeout, want, req.Limits.MaxFetchSize, func(repo *git.Repository) (string, error) {
		c, err := peelToCommit(repo.Storer, want, req.Commit)
		if err != nil {
			return "", err
		}
		tree, err := c.Tree()
		if err != nil {
			return "", fmt.Errorf("tree of %s: %w", c.Hash, err)
		}
		if sub != "" {
			if tree, err = tree.Tree(sub); err != nil {
				return "", fmt.Errorf("%w: %s in commit %s: %w", ErrPathNotFound, sub, c.Hash, err)
			}
		}
		if res, err = checkSubtree(ctx, repo.Storer, tree, req.Limits); err != nil {
			return "", fmt.Errorf("%s at commit %s, path %q: %w", ep.redacted, c.Hash, req.Path, err)
		}
		if err := writeTree(ctx, repo.Storer, tree, req.Dest, nil); err != nil {
			return "", fmt.Errorf("write %s: %w", req.Dest, err)
		}
		return "", nil
	})
	if err != nil {
		clearDir(req.Dest)
		return TreeResult{}, err
	}
	return res, nil
}

// withFetched fetches the object h (a commit or tag; depth 1) from ep into
// a temporary store and calls f with it. A server that refuses wants by
// hash gets every branch and tag fetched instead.
func withFetched(ctx context.Context, ep *endpoint, timeout time.Duration, h plumbing.Hash, maxSize int64, f func(*git.Repository) (string, error)) (string, error) {
	tmp, err := os.MkdirTemp("", "flotilla-fetch-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	repo, err := openCache(tmp)
	if err != nil {
		return "", err
	}
	specs := []config.RefSpec{config.RefSpec(h.String() + ":refs/flotilla/want")}
	err = fetchLimited(ctx, repo.Storer, ep, timeout, specs, 1, maxFetchSize(maxSize))
	if errors.Is(err, git.ErrExactSHA1NotSupported) {
		specs = []config.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}
		err = fetchLimited(ctx, repo.Storer, ep, timeout, specs, 0, maxFetchSize(maxSize))
	}
	if err != nil {
		return "", err
	}
	if _, err := repo.Storer.EncodedObject(plumbing.AnyObject, h); err != nil {
		return "", fmt.Errorf("fetch %s: %w: %s", ep.redacted, ErrRevisionNotFound, h)
	}
	return f(repo)
}

// checkSubtree walks tree and refuses what FetchTree must not write.
func checkSubtree(ctx context.Context, s storer.EncodedObjectStorer, tree *object.Tree, lim TreeLimits) (TreeResult, error) {
	res := TreeResult{Tree: tree.Hash.String()}
	var walk func(t *object.Tree, dir string) error
	walk = func(t *object.Tree, dir string) error {
		for _, e := range t.Entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !validEntryName(e.Name) {
				return fmt.Errorf("%w: tree entry %q in %q", ErrUnsafePath, e.Name, dir)
			}
			p := path.Join(dir, e.Name)
			switch e.Mode {
			case filemode.Dir:
				st, err := object.GetTree(s, e.Hash)
				if err != nil {
					return fmt.Errorf("tree %s: %w", p, err)
				}
				if err := walk(st, p); err != nil {
					return err
				}
				continue
			case filemode.Submodule:
				return fmt.Errorf("%s: a submodule cannot be vendored", p)
			case filemode.Symlink:
				target, err := readBlob(s, e.Hash, 4096)
				if err != nil {
					return fmt.Errorf("symlink %s: %w", p, err)
				}
				t := string(target)
				if path.IsAbs(t) || strings.HasPrefix(t, `\`) || escapes(path.Join(dir, t)) {
					return fmt.Errorf("%w: symlink %s -> %s leaves the tree", ErrUnsafePath, p, t)
				}
			}
			size, err := s.EncodedObjectSize(e.Hash)
			if err != nil {
				return fmt.Errorf("blob %s: %w", p, err)
			}
			res.Files++
			res.Bytes += size
			switch {
			case lim.MaxFileSize > 0 && size > lim.MaxFileSize:
				return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrTooLarge, p, size, lim.MaxFileSize)
			case lim.MaxFiles > 0 && res.Files > lim.MaxFiles:
				return fmt.Errorf("%w: more than %d files", ErrTooLarge, lim.MaxFiles)
			case lim.MaxTotalSize > 0 && res.Bytes > lim.MaxTotalSize:
				return fmt.Errorf("%w: more than %d bytes in all", ErrTooLarge, lim.MaxTotalSize)
			}
		}
		return nil
	}
	if err := walk(tree, ""); err != nil {
		return TreeResult{}, err
	}
	return res, nil
}

// escapes reports whether a cleaned, slash-separated relative path leaves
// its root.
func escapes(p string) bool {
	return p == ".." || strings.HasPrefix(p, "../")
}

// clearDir empties dir, keeping dir itself.
func clearDir(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.RemoveAll(dir + string(os.PathSeparator) + e.Name())
	}
}

func isFullHash(s string) bool {
	return len(s) == 40 && plumbing.NewHash(s).String() == s
}
