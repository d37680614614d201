package gitrepo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/flotilla-gitops/flotilla/pkg/redact"
)

// Source keeps a local checkout of one branch of a remote, for the agent.
// Set the exported fields, then call Sync; do not change them afterwards.
// Methods are safe for concurrent use (they serialise).
//
// Cache layout under CacheDir: repo/ (a bare, shallow object store),
// checkouts/<hash>/ (immutable exported trees), state.json (the last good
// checkout, so a restarted agent has it even while the remote is down).
type Source struct {
	URL      string
	Branch   string // "main" when empty
	Auth     Auth
	CacheDir string
	Timeout  time.Duration // per network operation; DefaultTimeout when zero
	// Paths limits checkouts to these slash-separated subtrees of the
	// repository (e.g. "rendered/member1", "charts"); all when empty.
	Paths []string
	// MaxFetchSize bounds the pack one fetch may download, in bytes: a
	// larger one fails with ErrTooLarge and the last good checkout stays.
	// Zero is DefaultMaxFetchSize; negative is no limit.
	MaxFetchSize int64
	// KeepCheckouts is how many checkouts stay on disk, newest first
	// (default 2): a Result's Dir remains valid until that many newer
	// checkouts were made.
	KeepCheckouts int
	// Protocol is the Git protocol for polls and fetches over HTTP(S):
	// ProtocolAuto (v2 when the server speaks it, probed once), ProtocolV2
	// or ProtocolV0. SSH remotes always use v0.
	Protocol string
	// Ref, when set, is a slice ref (SliceRef(cluster)) to follow instead
	// of the branch: its commits hold only the cluster's paths and are
	// checked against the main commit they name (see slices.go), which is
	// then the Result's Hash and what Commit returns for verification.
	// CommitsBetween (strict verification) then fetches main's commit
	// objects alone.
	Ref string
	// RefOptional follows Ref when the remote has it and the branch while
	// it has not (a fleet that does not publish slices, or not yet): the
	// default, right whether or not the fleet's CI publishes.
	RefOptional bool

	mu     sync.Mutex
	loaded bool
	last   *Result
	tip    string // the fetched ref's commit of last: Hash, or its slice commit
	// onBranch: with RefOptional, the last poll found no Ref and follows
	// the branch.
	onBranch bool
	// v2 is the protocol v2 client once the server was found to speak it;
	// v2Probed says the probe was made (v2 stays nil after a "no").
	v2       *v2Client
	v2Probed bool

	// held are checkouts (by directory name) a caller still reads:
	// gcCheckouts keeps them (Hold). Its own lock: Sync holds mu for a
	// whole fetch.
	heldMu sync.Mutex
	held   map[string]int
}

// Result is the outcome of a Sync.
type Result struct {
	// Revision is "<branch>@sha1:<hash>", the form Flux uses.
	Revision string
	Hash     string
	// Dir holds the commit's tree (or its Paths) on disk; it survives
	// restarts and is never modified once written.
	Dir        string
	CommitTime time.Time
	// Changed: Hash differs from the previous good sync's (also across
	// restarts). Fetched: a pack was downloaded; false when ls-remote showed
	// the cached head was current.
	Changed bool
	Fetched bool
}

type sourceState struct {
	URL        string    `json:"url"` // redacted
	Branch     string    `json:"branch"`
	Paths      []string  `json:"paths,omitempty"`
	Hash       string    `json:"hash"`
	Ref        string    `json:"ref,omitempty"`
	Tip        string    `json:"tip,omitempty"` // the slice commit of Hash when Ref is set
	CommitTime time.Time `json:"commitTime"`
	Recent     []string  `json:"recent"` // checkout keys, newest first
	// Digests are dirDigest of the Recent checkouts, by key.
	Digests map[string]string `json:"digests,omitempty"`
}

func (s *Source) branch() string {
	if s.Branch == "" {
		return "main"
	}
	return s.Branch
}

func (s *Source) branchRef() plumbing.ReferenceName {
	return plumbing.NewBranchReferenceName(s.branch())
}

// fetchRef is the ref polled and fetched: Ref, else the branch.
func (s *Source) fetchRef() plumbing.ReferenceName {
	if s.onSlice() {
		return plumbing.ReferenceName(s.Ref)
	}
	return s.branchRef()
}

// onSlice: the Source follows a slice ref now.
func (s *Source) onSlice() bool { return s.Ref != "" && !s.onBranch }

// followed is the Ref recorded in the state: "" on the branch.
func (s *Source) followed() string {
	if s.onSlice() {
		return s.Ref
	}
	return ""
}

// Following names the ref the last Sync followed (for logs and status):
// the slice ref, or refs/heads/<branch>.
func (s *Source) Following() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetchRef().String()
}

// AwaitingSlice reports that the last Sync followed the branch because
// the remote has no slice ref for this Source yet (RefOptional): the fetch
// grows with the fleet until CI publishes slices.
func (s *Source) AwaitingSlice() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Ref != "" && s.onBranch
}

func (s *Source) repoDir() string      { return filepath.Join(s.CacheDir, "repo") }
func (s *Source) checkoutsDir() string { return filepath.Join(s.CacheDir, "checkouts") }
func (s *Source) statePath() string    { return filepath.Join(s.CacheDir, "state.json") }

// checkoutKey names the checkout of hash; Paths are part of it, since a
// different selection is a different directory content.
func (s *Source) checkoutKey(hash string) string {
	if len(s.Paths) == 0 {
		return hash
	}
	sum := sha256.Sum256([]byte(strings.Join(s.Paths, "\x00")))
	return hash + "-" + hex.EncodeToString(sum[:4])
}

func (s *Source) revision(hash string) string { return s.branch() + "@sha1:" + hash }

func (s *Source) validate() error {
	if s.CacheDir == "" {
		return errors.New("gitrepo: Source.CacheDir is required")
	}
	if s.URL == "" {
		return errors.New("gitrepo: Source.URL is required")
	}
	if err := s.branchRef().Validate(); err != nil {
		return fmt.Errorf("gitrepo: branch %q: %w", s.Branch, err)
	}
	if s.Ref != "" {
		if err := plumbing.ReferenceName(s.Ref).Validate(); err != nil || !strings.HasPrefix(s.Ref, SliceRefPrefix) {
			return fmt.Errorf("gitrepo: ref %q: want a slice ref %s<cluster>", s.Ref, SliceRefPrefix)
		}
	}
	return ValidProtocol(s.Protocol)
}

// protocolV2 returns the v2 client when polls and fetches go over protocol
// v2, nil for v0. In auto mode the server is probed once per Source.
func (s *Source) protocolV2(ctx context.Context, ep *endpoint) (*v2Client, error) {
	if s.Protocol == ProtocolV0 {
		return nil, nil
	}
	if s.v2Probed {
		return s.v2, nil
	}
	c, err := newV2Client(ep, s.Timeout)
	if err != nil {
		return nil, err
	}
	ok := false
	if c != nil {
		if ok, err = c.probe(ctx); err != nil {
			return nil, err
		}
	}
	if !ok && s.Protocol == ProtocolV2 {
		return nil, fmt.Errorf("ls-refs %s: %w", ep.redacted, errNoV2)
	}
	s.v2Probed = true
	if ok {
		s.v2 = c
	}
	return s.v2, nil
}

// headOf lists the branch's head: v2 ls-refs of that one ref, or a v0
// ls-remote (the whole advertisement). A server that stops speaking v2
// is probed again next time.
func (s *Source) headOf(ctx context.Context, ep *endpoint) (plumbing.Hash, *v2Client, error) {
	c, err := s.protocolV2(ctx, ep)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	names := []string{s.fetchRef().String()}
	if s.RefOptional && s.Ref != "" {
		names = []string{s.Ref, s.branchRef().String()}
	}
	var refs map[string]plumbing.Hash
	if c != nil {
		refs, err = c.lsRefs(ctx, names...)
		if errors.Is(err, errNoV2) && s.Protocol != ProtocolV2 {
			s.v2, s.v2Probed, c = nil, false, nil
		}
	}
	if c == nil {
		refs, err = listRefs(ctx, ep, s.Timeout)
	}
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	if s.RefOptional && s.Ref != "" {
		_, published := refs[s.Ref]
		s.onBranch = !published
	}
	remote, ok := refs[s.fetchRef().String()]
	if !ok {
		return plumbing.ZeroHash, nil, fmt.Errorf("ls-remote %s: %w: %s", ep.redacted, ErrRefNotFound, s.fetchRef())
	}
	return remote, c, nil
}

// LastGood returns the last successful Sync's result, also one made by a
// previous process on the same CacheDir; ok is false when there is none.
// It never touches the network. Its Changed and Fetched are false.
func (s *Source) LastGood() (Result, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.validate(); err != nil {
		return Result{}, false
	}
	s.load()
	if s.last == nil {
		return Result{}, false
	}
	r := *s.last
	r.Changed, r.Fetched = false, false
	return r, true
}

// load reads state.json once and keeps it when it matches this Source's
// URL, branch and paths and its checkout is still on disk.
func (s *Source) load() {
	if s.loaded {
		return
	}
	s.loaded = true
	st, err := s.readState()
	refOK := st.Ref == s.Ref || (s.RefOptional && st.Ref == "")
	if err != nil || st.URL != redact.URL(s.URL) || st.Branch != s.branch() || !refOK || strings.Join(st.Paths, "\x00") != strings.Join(s.Paths, "\x00") {
		return
	}
	s.onBranch = s.Ref != "" && st.Ref == ""
	key := s.checkoutKey(st.Hash)
	dir := filepath.Join(s.checkoutsDir(), key)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return
	}
	if !s.checkoutIntact(key, dir) {
		// Damaged on disk: no last good checkout until Sync exports it again.
		_ = os.RemoveAll(dir)
		return
	}
	s.last = &Result{Revision: s.revision(st.Hash), Hash: st.Hash, Dir: dir, CommitTime: st.CommitTime}
	s.tip = st.Tip
	if s.tip == "" {
		s.tip = st.Hash
	}
}

func (s *Source) readState() (sourceState, error) {
	var st sourceState
	b, err := os.ReadFile(s.statePath())
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(b, &st)
	return st, err
}

func (s *Source) writeState(st sourceState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.statePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.statePath())
}

// Sync brings the checkout up to date with the remote branch head. It first
// lists the remote refs (ls-remote); when the head is the one already
// checked out, nothing is fetched. Otherwise it fetches the branch alone,
// depth 1, into the cache and exports the tree to a new checkout
// directory. A cache that fails to open, fetch into or read is discarded and
// cloned again. When the remote is unreachable the error is ErrUnreachable
// and LastGood still returns the previous checkout.
func (s *Source) Sync(ctx context.Context) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.validate(); err != nil {
		return Result{}, err
	}
	s.load()
	ep, err := s.Auth.endpoint(s.URL, timeoutOr(s.Timeout))
	if err != nil {
		return Result{}, err
	}
	remote, v2, err := s.headOf(ctx, ep)
	if err != nil {
		return Result{}, err
	}
	if s.last != nil && s.tip == remote.String() && s.cached(remote) {
		return *s.last, nil
	}

	res, err := s.fetchAndCheckout(ctx, ep, v2, remote)
	if err != nil && !isTransportError(err) && !errors.Is(err, ErrUnsafePath) && !errors.Is(err, ErrBadSlice) && ctx.Err() == nil {
		// A local failure: the cache is damaged. Start from scratch once.
		if rmErr := os.RemoveAll(s.repoDir()); rmErr != nil {
			return Result{}, errors.Join(err, rmErr)
		}
		res, err = s.fetchAndCheckout(ctx, ep, v2, remote)
	}
	if err != nil {
		return Result{}, err
	}
	res.Changed = s.last == nil || s.last.Hash != res.Hash
	last := res
	last.Changed, last.Fetched = false, false
	s.last = &last
	s.tip = remote.String()
	return res, nil
}

// cached reports whether the checkout of the last good sync is on disk and
// its commit is in the object store (Commit and CommitsBetween need it).
func (s *Source) cached(h plumbing.Hash) bool {
	if _, err := os.Stat(s.last.Dir); err != nil {
		return false
	}
	repo, err := openCache(s.repoDir())
	if err != nil {
		return false
	}
	if _, err = repo.CommitObject(h); err != nil {
		return false
	}
	// The main commit a slice names, for Commit (verification).
	_, err = repo.CommitObject(plumbing.NewHash(s.last.Hash))
	return err == nil
}

// fetchAndCheckout fetches want (over v2 when v2 is not nil) unless the
// cache has it, and exports its tree.
func (s *Source) fetchAndCheckout(ctx context.Context, ep *endpoint, v2 *v2Client, want plumbing.Hash) (Result, error) {
	repo, err := openCache(s.repoDir())
	if err != nil {
		return Result{}, err
	}
	fetched := false
	if _, err := repo.CommitObject(want); err != nil {
		depth := s.fetchDepth(repo)
		if v2 != nil {
			var haves []plumbing.Hash
			if depth == 0 {
				if ref, err := repo.Reference(s.fetchRef(), true); err == nil {
					haves = append(haves, ref.Hash())
				}
			}
			err = v2.fetch(ctx, repo.Storer, want, haves, depth, maxFetchSize(s.MaxFetchSize))
			if err == nil {
				err = repo.Storer.SetReference(plumbing.NewHashReference(s.fetchRef(), want))
			}
		} else {
			specs := []config.RefSpec{config.RefSpec("+" + s.fetchRef().String() + ":" + s.fetchRef().String())}
			err = fetchLimited(ctx, repo.Storer, ep, s.Timeout, specs, depth, maxFetchSize(s.MaxFetchSize))
		}
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				removeTempPacks(s.repoDir())
			}
			return Result{}, err
		}
		fetched = true
	} else if err := repo.Storer.SetReference(plumbing.NewHashReference(s.fetchRef(), want)); err != nil {
		return Result{}, err
	}
	ref, err := repo.Reference(s.fetchRef(), true)
	if err != nil {
		return Result{}, fmt.Errorf("cache: %w", err)
	}
	tip, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return Result{}, fmt.Errorf("cache: %w", err)
	}
	commit := tip // the commit Result names: the branch head, or the main commit a slice was cut from
	if s.onSlice() {
		if commit, err = verifySlice(repo.Storer, tip); err != nil {
			return Result{}, err
		}
	}
	dir, digest, err := s.checkout(ctx, repo, commit.Hash, tip)
	if err != nil {
		return Result{}, err
	}
	hash := commit.Hash.String()
	st, _ := s.readState()
	recent := []string{s.checkoutKey(hash)}
	for _, k := range st.Recent {
		if k != recent[0] {
			recent = append(recent, k)
		}
	}
	keep := s.KeepCheckouts
	if keep < 1 {
		keep = 2
	}
	if len(recent) > keep {
		recent = recent[:keep]
	}
	digests := map[string]string{}
	for _, k := range recent {
		if d, ok := st.Digests[k]; ok {
			digests[k] = d
		}
	}
	if digest != "" {
		digests[recent[0]] = digest
	}
	if err := s.writeState(sourceState{
		URL: redact.URL(s.URL), Branch: s.branch(), Paths: s.Paths, Ref: s.followed(), Tip: tip.Hash.String(),
		Hash: hash, CommitTime: commit.Committer.When, Recent: recent, Digests: digests,
	}); err != nil {
		return Result{}, err
	}
	s.gcCheckouts(recent)
	if fetched {
		// Each fetch leaves a pack holding the previous objects too; repack
		// only what the head needs once they pile up.
		// Not fatal when it fails: the checkout is done, and a damaged
		// cache is cloned again by the next Sync.
		_ = compactIfNeeded(s.repoDir(), repo, s.fetchRef(), tip, commit.Hash)
	}
	return Result{
		Revision:   s.revision(hash),
		Hash:       hash,
		Dir:        dir,
		CommitTime: commit.Committer.When,
		Fetched:    fetched,
	}, nil
}

// fetchDepth is 1 for a cold cache. With a previous head in the cache it
// is 0 (no deepen): the server then sends only what is new since that head,
// where a depth-1 fetch would send the whole tree again (upload-pack
// ignores the haves when deepening). The branch is expected to only move
// forward (main is protected); after a rewrite, the new history is fetched
// once, and compaction trims the cache again.
func (s *Source) fetchDepth(repo *git.Repository) int {
	ref, err := repo.Reference(s.fetchRef(), true)
	if err != nil {
		return 1
	}
	if _, err := repo.CommitObject(ref.Hash()); err != nil {
		return 1
	}
	return 0
}
