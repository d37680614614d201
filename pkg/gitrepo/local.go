package gitrepo

import (
	"context"
	"fmt"
)

// ExportPaths is ExportTree limited to the given slash-separated subtrees
// (e.g. "clusters", "fleets"); the rest of the tree is not read. No paths
// exports everything.
func ExportPaths(ctx context.Context, repoDir, rev, destDir string, paths []string) error {
	filter, err := newPathFilter(paths)
	if err != nil {
		return err
	}
	r, err := openLocal(repoDir)
	if err != nil {
		return err
	}
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
	return writeTree(ctx, r.Storer, tree, destDir, filter)
}

// CommitsBetweenLocal is Source.CommitsBetween for the local repository
// at repoDir: the commits reachable from to but not from from (git rev-list
// from..to), newest first; none when from equals to. ErrNotAncestor when
// from is not in to's history (or beyond a shallow clone's boundary).
func CommitsBetweenLocal(ctx context.Context, repoDir, from, to string) ([]Commit, error) {
	r, err := openLocal(repoDir)
	if err != nil {
		return nil, err
	}
	fromC, err := resolveCommit(r, from)
	if err != nil {
		return nil, err
	}
	toC, err := resolveCommit(r, to)
	if err != nil {
		return nil, err
	}
	if fromC.Hash == toC.Hash {
		return nil, nil
	}
	commits, complete, err := rangeLocal(ctx, r.Storer, fromC.Hash, toC.Hash)
	if err != nil {
		return nil, err
	}
	if !complete {
		return nil, fmt.Errorf("%w: %s not found in the local history of %s", ErrNotAncestor, from, to)
	}
	return commits, nil
}
