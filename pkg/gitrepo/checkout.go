package gitrepo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// checkout exports the tree of commit src (a slice's without its proof)
// into checkouts/<key of hash>, atomically: a crash leaves only a
// temporary directory, removed by the next gc.
func (s *Source) checkout(ctx context.Context, repo *git.Repository, hash plumbing.Hash, commit *object.Commit) (string, string, error) {
	key := s.checkoutKey(hash.String())
	dir := filepath.Join(s.checkoutsDir(), key)
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		if s.checkoutIntact(key, dir) {
			return dir, "", nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return "", "", fmt.Errorf("remove damaged checkout: %w", err)
		}
	}
	filter, err := newPathFilter(s.Paths)
	if err != nil {
		return "", "", err
	}
	tree, err := commit.Tree()
	if err != nil {
		return "", "", fmt.Errorf("cache: tree of %s: %w", commit.Hash, err)
	}
	if s.onSlice() {
		pruned := &object.Tree{Hash: tree.Hash}
		for _, e := range tree.Entries {
			if e.Name != SliceProofDir {
				pruned.Entries = append(pruned.Entries, e)
			}
		}
		tree = pruned
	}
	if err := os.MkdirAll(s.checkoutsDir(), 0o755); err != nil {
		return "", "", err
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.checkoutsDir(), ".tmp-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", "", err
	}
	if err := writeTree(ctx, repo.Storer, tree, tmp, filter); err != nil {
		os.RemoveAll(tmp)
		return "", "", fmt.Errorf("checkout %s: %w", commit.Hash, err)
	}
	digest, err := dirDigest(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return "", "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return "", "", err
	}
	return dir, digest, nil
}

func (s *Source) gcCheckouts(keep []string) {
	entries, err := os.ReadDir(s.checkoutsDir())
	if err != nil {
		return
	}
	keepSet := map[string]bool{}
	for _, k := range keep {
		keepSet[k] = true
	}
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	for _, e := range entries {
		if !keepSet[e.Name()] && s.held[e.Name()] == 0 {
			os.RemoveAll(filepath.Join(s.checkoutsDir(), e.Name()))
		}
	}
}

// Hold keeps the checkout at dir (a Result's Dir) on disk, whatever
// later syncs remove, until release is called: the agent polls Git while
// it still renders from the revision it reconciles.
func (s *Source) Hold(dir string) (release func()) {
	if filepath.Dir(dir) != s.checkoutsDir() {
		return func() {}
	}
	key := filepath.Base(dir)
	s.heldMu.Lock()
	if s.held == nil {
		s.held = map[string]int{}
	}
	s.held[key]++
	s.heldMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.heldMu.Lock()
			defer s.heldMu.Unlock()
			if s.held[key]--; s.held[key] <= 0 {
				delete(s.held, key)
			}
		})
	}
}

// Checkout returns the checkout of hash, a commit of the branch that need
// not be its head (the agent's last accepted revision after a restart):
// from the cache when it holds the commit, else fetching more and more of
// the branch's history until it does. It does not change LastGood, and a
// later Sync may remove the directory; call Checkout again then. A commit
// no longer in the branch's history is ErrRevisionNotFound.
func (s *Source) Checkout(ctx context.Context, hash string) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.validate(); err != nil {
		return Result{}, err
	}
	repo, err := openCache(s.repoDir())
	if err != nil {
		return Result{}, err
	}
	want := plumbing.NewHash(hash)
	if want.String() != hash {
		return Result{}, fmt.Errorf("checkout %q: %w: not a commit hash", hash, ErrRevisionNotFound)
	}
	if s.onSlice() {
		return s.sliceCheckout(hash)
	}
	commit, err := repo.CommitObject(want)
	if err != nil {
		ep, err := s.Auth.endpoint(s.URL, timeoutOr(s.Timeout))
		if err != nil {
			return Result{}, err
		}
		specs := []config.RefSpec{config.RefSpec("+" + s.branchRef().String() + ":" + s.branchRef().String())}
		for _, depth := range []int{16, 128, 1024, 16384, 1 << 30} {
			if err := fetchLimited(ctx, repo.Storer, ep, s.Timeout, specs, depth, maxFetchSize(s.MaxFetchSize)); err != nil {
				return Result{}, err
			}
			if commit, err = repo.CommitObject(want); err == nil {
				break
			}
		}
		if commit == nil {
			return Result{}, fmt.Errorf("checkout %s: %w in the history of %s", hash, ErrRevisionNotFound, s.branch())
		}
	}
	dir, digest, err := s.checkout(ctx, repo, commit.Hash, commit)
	if err != nil {
		return Result{}, err
	}
	if st, err := s.readState(); err == nil && digest != "" {
		// Record it, so that reusing this tree later checks it like any other.
		if st.Digests == nil {
			st.Digests = map[string]string{}
		}
		st.Digests[s.checkoutKey(hash)] = digest
		if err := s.writeState(st); err != nil {
			return Result{}, err
		}
	}
	return Result{Revision: s.revision(hash), Hash: hash, Dir: dir, CommitTime: commit.Committer.When}, nil
}

// sliceCheckout is Checkout with a slice ref: only the checkouts kept on
// disk can be given back (older slice commits are not fetched again).
func (s *Source) sliceCheckout(hash string) (Result, error) {
	st, err := s.readState()
	if err == nil {
		key := s.checkoutKey(hash)
		dir := filepath.Join(s.checkoutsDir(), key)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() && s.checkoutIntact(key, dir) {
			t := st.CommitTime
			if st.Hash != hash {
				t = time.Time{}
			}
			return Result{Revision: s.revision(hash), Hash: hash, Dir: dir, CommitTime: t}, nil
		}
	}
	return Result{}, fmt.Errorf("checkout %s: %w: not among the kept checkouts of %s", hash, ErrRevisionNotFound, s.Ref)
}
