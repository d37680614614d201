package fleetview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// ReadOptions say where the hub reads the fleet from.
type ReadOptions struct {
	// Repo is the fleet repo: a URL (fetched into CacheDir) or a local
	// repository directory (a clone or a bare repository, read in place).
	Repo string
	// Branch is the fleet repo's branch; "main" when empty.
	Branch string
	// StatusRepos hold the status refs when they are not in Repo (a
	// separate, possibly sharded status repo: see ShardURLs). URLs or
	// local directories.
	StatusRepos []string
	Auth        gitrepo.Auth
	// CacheDir keeps fetched objects between calls (--watch); for URLs
	// only. A directory under the user's cache directory when empty.
	CacheDir string
	// Timeout bounds each network operation; gitrepo.DefaultTimeout when zero.
	Timeout time.Duration
	// Clusters limits the view to these clusters; all when empty.
	Clusters []string
	// Now is the clock ages are computed against; time.Now when nil.
	Now func() time.Time
	// ClockSkewTolerance is how far ahead of Now a heartbeat may be before
	// the cluster shows ClockSkew; DefaultClockSkewTolerance when zero.
	ClockSkewTolerance time.Duration
}

func (o *ReadOptions) branch() string {
	if o.Branch == "" {
		return "main"
	}
	return o.Branch
}

func (o *ReadOptions) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func isLocalDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// cacheDirFor is the cache of one remote under the options' cache root.
func (o *ReadOptions) cacheDirFor(kind, url string) (string, error) {
	root := o.CacheDir
	if root == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		root = filepath.Join(base, "flotilla", "status")
	}
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(root, kind+"-"+hex.EncodeToString(sum[:8])), nil
}

// mainBranch is the fleet repo's branch head, with its clusters/ and
// fleets/ loaded and its history at hand for diffs.
type mainBranch struct {
	repoDir  string // a local repository holding the head (and history on demand)
	head     string // commit hash
	revision string // "<branch>@sha1:<hash>"
	fleet    *fleet.Repo
	warnings []string
	remote   *gitrepo.Source // nil when the repo is a local directory
	tmp      string
}

func (m *mainBranch) close() {
	if m.tmp != "" {
		_ = os.RemoveAll(m.tmp)
	}
}

// inputPaths are all the status view needs of the fleet repo's tree.
var inputPaths = []string{"clusters", "fleets"}

func openMain(ctx context.Context, o *ReadOptions) (*mainBranch, error) {
	m := &mainBranch{}
	var treeDir string
	if isLocalDir(o.Repo) {
		head, err := gitrepo.ResolveRevision(o.Repo, o.branch())
		if err != nil {
			return nil, fmt.Errorf("fleet repo %s: branch %s: %w", o.Repo, o.branch(), err)
		}
		tmp, err := os.MkdirTemp("", "flotilla-status-")
		if err != nil {
			return nil, err
		}
		m.tmp = tmp
		treeDir = filepath.Join(tmp, "tree")
		if err := gitrepo.ExportPaths(ctx, o.Repo, head, treeDir, inputPaths); err != nil {
			m.close()
			return nil, fmt.Errorf("fleet repo %s: %w", o.Repo, err)
		}
		m.repoDir, m.head = o.Repo, head
	} else {
		dir, err := o.cacheDirFor("fleet", o.Repo)
		if err != nil {
			return nil, err
		}
		src := &gitrepo.Source{URL: o.Repo, Branch: o.branch(), Auth: o.Auth, CacheDir: dir, Timeout: o.Timeout, Paths: inputPaths}
		res, err := src.Sync(ctx)
		if err != nil {
			return nil, fmt.Errorf("fleet repo: %w", err)
		}
		// Source's documented cache layout: the object store is repo/.
		m.repoDir, m.head, m.remote, treeDir = filepath.Join(dir, "repo"), res.Hash, src, res.Dir
	}
	m.revision = o.branch() + "@sha1:" + m.head
	r, err := fleet.Load(ctx, treeDir)
	var list fleet.ErrorList
	switch {
	case errors.As(err, &list) && r != nil:
		m.warnings = append(m.warnings, fmt.Sprintf("the fleet repo at %s has %d problem(s); run flotilla validate", status.ShortRevision(m.revision), len(list)))
	case err != nil:
		m.close()
		return nil, err
	}
	m.fleet = r
	return m, nil
}

// ensureHistory makes sure commit (an ancestor of the head) is in the
// local object store, deepening a remote's shallow cache as needed.
func (m *mainBranch) ensureHistory(ctx context.Context, commit string) error {
	if m.remote == nil || commit == m.head {
		return nil
	}
	_, err := m.remote.CommitsBetween(ctx, commit, m.head)
	return err
}

// between lists the commits after from up to the head, newest first
// (ErrNotAncestor when from is not in the head's history).
func (m *mainBranch) between(ctx context.Context, from string) ([]gitrepo.Commit, error) {
	if from == m.head {
		return nil, nil
	}
	if m.remote != nil {
		return m.remote.CommitsBetween(ctx, from, m.head)
	}
	return gitrepo.CommitsBetweenLocal(ctx, m.repoDir, from, m.head)
}

// changed lists the paths that differ between two commits of the branch.
func (m *mainBranch) changed(ctx context.Context, from, to string) ([]string, error) {
	if err := m.ensureHistory(ctx, from); err != nil {
		return nil, err
	}
	return gitrepo.ChangedFiles(ctx, m.repoDir, from, to)
}

var fullHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// resolve turns a user's revision into a full commit hash: empty, the
// branch name or HEAD mean the head. A remote repo needs a full hash
// (its cache holds only part of the history).
func (m *mainBranch) resolve(ctx context.Context, rev, branch string) (string, error) {
	rev = strings.TrimSpace(rev)
	if h := status.RevisionHash(rev); fullHash.MatchString(h) {
		rev = h
	}
	switch rev {
	case "", "HEAD", branch, m.head:
		return m.head, nil
	}
	if m.remote != nil {
		if !fullHash.MatchString(rev) {
			return "", fmt.Errorf("revision %q: give the full 40-character commit hash for a remote fleet repo (or use a local clone)", rev)
		}
		if err := m.ensureHistory(ctx, rev); err != nil {
			return "", fmt.Errorf("revision %s: %w", rev, err)
		}
		return rev, nil
	}
	return gitrepo.ResolveRevision(m.repoDir, rev)
}
