package gitrepo

// Reading the cached history: single commits and the commits between two
// revisions (what strict verification walks), without a checkout.

import (
	"context"
	"errors"
	"fmt"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Commit reads a commit from the cache (e.g. a Result's Hash, to verify its
// signature). No network.
func (s *Source) Commit(hash string) (Commit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, err := openCache(s.repoDir())
	if err != nil {
		return Commit{}, err
	}
	c, err := repo.CommitObject(plumbing.NewHash(hash))
	if err != nil {
		return Commit{}, fmt.Errorf("commit %s: %w: %w", hash, ErrRevisionNotFound, err)
	}
	return newCommit(c)
}

// CommitsBetween returns the commits reachable from to but not from from
// (git rev-list from..to), newest first, deepening the shallow cache by
// fetching more history of the branch as needed. from == to gives none. If
// from is not an ancestor of to (rewritten history) the error is
// ErrNotAncestor. Where the shallow history cannot prove a commit is an
// ancestor of from it is included, so the answer errs on checking more.
func (s *Source) CommitsBetween(ctx context.Context, from, to string) ([]Commit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.validate(); err != nil {
		return nil, err
	}
	repo, err := openCache(s.repoDir())
	if err != nil {
		return nil, err
	}
	fromH, toH := plumbing.NewHash(from), plumbing.NewHash(to)
	if fromH == toH {
		return nil, nil
	}
	var ep *endpoint
	for _, depth := range []int{0, 16, 128, 1024, 16384, 1 << 30} {
		if depth > 0 {
			if ep == nil {
				if ep, err = s.Auth.endpoint(s.URL, timeoutOr(s.Timeout)); err != nil {
					return nil, err
				}
			}
			if err := s.fetchHistory(ctx, repo, ep, depth); err != nil {
				return nil, err
			}
		}
		commits, complete, err := rangeLocal(ctx, repo.Storer, fromH, toH)
		if err != nil {
			return nil, err
		}
		if complete {
			return commits, nil
		}
	}
	return nil, fmt.Errorf("%w: %s not found in the history of %s", ErrNotAncestor, from, to)
}

// fetchHistory deepens the cache's history of the branch to depth. A
// slice holds one main commit, not main's history: its Source then fetches
// main's commit objects alone (filter tree:0 over protocol v2), which cost
// the same whatever the size of the fleet's tree; a server without v2 or
// filters gets the branch's full history, as without slices.
func (s *Source) fetchHistory(ctx context.Context, repo *git.Repository, ep *endpoint, depth int) error {
	if s.onSlice() {
		v2, err := s.protocolV2(ctx, ep)
		if err != nil {
			return err
		}
		if v2 != nil {
			refs, err := v2.lsRefs(ctx, s.branchRef().String())
			if err != nil {
				return err
			}
			head, ok := refs[s.branchRef().String()]
			if !ok {
				return fmt.Errorf("ls-remote %s: %w: %s", ep.redacted, ErrRefNotFound, s.branchRef())
			}
			err = v2.fetchCommits(ctx, repo.Storer, head, depth, maxFetchSize(s.MaxFetchSize))
			// A server that does not filter says so with an ERR line.
			if err == nil || !(errors.Is(err, errNoV2) || errors.Is(err, ErrRefNotFound)) {
				return err
			}
		}
	}
	specs := []config.RefSpec{config.RefSpec("+" + s.branchRef().String() + ":" + s.branchRef().String())}
	err := fetchLimited(ctx, repo.Storer, ep, s.Timeout, specs, depth, maxFetchSize(s.MaxFetchSize))
	if errors.Is(err, ErrTooLarge) {
		removeTempPacks(s.repoDir())
	}
	return err
}

// rangeLocal computes from..to in st. complete is false when a shallow
// boundary (a missing parent) was hit before the answer was certain.
func rangeLocal(ctx context.Context, st storer.EncodedObjectStorer, from, to plumbing.Hash) ([]Commit, bool, error) {
	if _, err := object.GetCommit(st, to); err != nil {
		return nil, false, fmt.Errorf("commit %s: %w: %w", to, ErrRevisionNotFound, err)
	}
	// Ancestors of from present locally.
	excluded := map[plumbing.Hash]bool{}
	if _, err := object.GetCommit(st, from); err != nil {
		return nil, false, nil // from is beyond the shallow boundary
	}
	stack := []plumbing.Hash{from}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if excluded[h] {
			continue
		}
		c, err := object.GetCommit(st, h)
		if err != nil {
			continue // shallow boundary on from's side: include more, not less
		}
		excluded[h] = true
		stack = append(stack, c.ParentHashes...)
	}
	var out []Commit
	seen := map[plumbing.Hash]bool{}
	queue := []plumbing.Hash{to}
	metFrom := false
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		h := queue[0]
		queue = queue[1:]
		if seen[h] {
			continue
		}
		seen[h] = true
		if excluded[h] {
			metFrom = true
			continue
		}
		c, err := object.GetCommit(st, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		cc, err := newCommit(c)
		if err != nil {
			return nil, false, err
		}
		out = append(out, cc)
		queue = append(queue, c.ParentHashes...)
	}
	if !metFrom {
		return nil, true, fmt.Errorf("%w: %s is not an ancestor of %s", ErrNotAncestor, from, to)
	}
	return out, true, nil
}
