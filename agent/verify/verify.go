package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Mode says which commits must be signed.
type Mode string

const (
	ModeNone   Mode = "none"
	ModeHead   Mode = "head"
	ModeStrict Mode = "strict"
)

// ParseMode accepts none, head and strict (case-insensitive; Flux's
// spec.verify.mode "HEAD" is head).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case ModeNone, ModeHead, ModeStrict:
		return m, nil
	case "":
		return ModeNone, nil
	}
	return "", fmt.Errorf("verification mode %q: want none, head or strict", s)
}

// Reasons a commit is refused: the values of the metric's reason label.
const (
	ReasonUnsigned         = "unsigned"
	ReasonUntrustedSigner  = "untrusted_signer"
	ReasonBadSignature     = "bad_signature"
	ReasonHistoryRewritten = "history_rewritten"
	ReasonKeysUnavailable  = "keys_unavailable"
	ReasonGitError         = "git_error"
	// ReasonNoAnchor: strict mode has no recorded anchor and no trust
	// root to start from.
	ReasonNoAnchor = "no_anchor"
	// ReasonStateUnavailable: the anchor could not be read, or what was
	// read is corrupt.
	ReasonStateUnavailable = "state_unavailable"
)

// Reasons lists every reason, for initialising metric series.
var Reasons = []string{ReasonUnsigned, ReasonUntrustedSigner, ReasonBadSignature, ReasonHistoryRewritten, ReasonKeysUnavailable, ReasonGitError, ReasonNoAnchor, ReasonStateUnavailable}

// ErrRefused classifies every refusal.
var ErrRefused = errors.New("commit refused")

// ErrNoAnchor: strict mode has neither an anchor nor a trust root.
var ErrNoAnchor = errors.New("strict verification has no anchor")

// RefusedError says why a commit may not be applied.
type RefusedError struct {
	Reason string
	// Commit is the commit at fault (the head, or an unsigned ancestor).
	Commit string
	Err    error
}

func (e *RefusedError) Error() string {
	if e.Commit == "" {
		return fmt.Sprintf("%s (%s): %v", ErrRefused, e.Reason, e.Err)
	}
	return fmt.Sprintf("%s (%s): commit %s: %v", ErrRefused, e.Reason, shortHash(e.Commit), e.Err)
}

// Unwrap gives errors.Is both ErrRefused and the cause.
func (e *RefusedError) Unwrap() []error { return []error{ErrRefused, e.Err} }

// Commits reads commits of the fetched branch; *gitrepo.Source implements
// it.
type Commits interface {
	Commit(hash string) (gitrepo.Commit, error)
	CommitsBetween(ctx context.Context, from, to string) ([]gitrepo.Commit, error)
}

// Anchor stores strict mode's anchor; *state.Store implements it.
type Anchor interface {
	// LoadAnchor returns the anchor, "" when none was ever recorded; an
	// unreadable or corrupt anchor is an error (and refuses).
	LoadAnchor(ctx context.Context) (string, error)
	StoreAnchor(ctx context.Context, hash string) error
}

// Config configures a Verifier.
type Config struct {
	Mode Mode
	// KeysDir holds the trusted public keys (a mounted Secret); required
	// unless Mode is none.
	KeysDir string
	// Commits reads the commits to check; required unless Mode is none.
	Commits Commits
	// Anchor keeps strict mode's last accepted commit where it survives
	// restarts and failover (the cluster); required in strict mode.
	Anchor Anchor
	// TrustRoot is the commit strict mode starts from when Anchor holds
	// none: the operator vouches for it and its history, every commit
	// after it must be signed. Without it, a missing anchor refuses.
	TrustRoot string
	// OnRefused is called with the reason of every refusal (the agent
	// counts them in a metric).
	OnRefused func(reason string)
}

// Verifier decides whether a fetched head may be applied. It implements
// the agent loop's reconcile.Verifier. Safe for concurrent use.
type Verifier struct {
	cfg Config

	mu      sync.Mutex
	keys    *signature.KeyRing
	keysSum string // digest of the KeysDir content keys was parsed from
}

// New checks cfg and returns a Verifier.
func New(cfg Config) (*Verifier, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeNone
	}
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return nil, err
	}
	if cfg.Mode != ModeNone {
		if cfg.KeysDir == "" {
			return nil, fmt.Errorf("verification mode %s needs a directory of trusted keys", cfg.Mode)
		}
		if cfg.Commits == nil {
			return nil, errors.New("verify: Config.Commits is required")
		}
	}
	if cfg.Mode == ModeStrict && cfg.Anchor == nil {
		return nil, errors.New("verify: strict mode needs Config.Anchor")
	}
	if cfg.TrustRoot != "" && !validHash(cfg.TrustRoot) {
		return nil, fmt.Errorf("trust root %q: want a full commit hash", cfg.TrustRoot)
	}
	return &Verifier{cfg: cfg}, nil
}

// Mode is the configured mode.
func (v *Verifier) Mode() Mode { return v.cfg.Mode }

// Verify accepts or refuses head. The returned Verification goes to
// status (nil in mode none: nothing was verified); a refusal is a
// *RefusedError.
func (v *Verifier) Verify(ctx context.Context, head gitrepo.Result) (*status.Verification, error) {
	if v.cfg.Mode == ModeNone {
		return nil, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	out := &status.Verification{Mode: string(v.cfg.Mode)}
	ver, err := v.verify(ctx, head.Hash)
	if err != nil {
		var re *RefusedError
		if !errors.As(err, &re) {
			re = &RefusedError{Reason: ReasonGitError, Commit: head.Hash, Err: err}
			err = re
		}
		if v.cfg.OnRefused != nil {
			v.cfg.OnRefused(re.Reason)
		}
		out.Message = err.Error()
		return out, status.Stalling(status.ReasonVerificationFailed, err)
	}
	out.Verified = true
	out.Signer = ver.signer
	out.Message = ver.message
	return out, nil
}

type verdict struct{ signer, message string }

func (v *Verifier) verify(ctx context.Context, head string) (verdict, error) {
	keys, err := v.loadKeys()
	if err != nil {
		return verdict{}, &RefusedError{Reason: ReasonKeysUnavailable, Err: err}
	}
	c, err := v.cfg.Commits.Commit(head)
	if err != nil {
		return verdict{}, &RefusedError{Reason: ReasonGitError, Commit: head, Err: err}
	}
	signer, err := check(c, keys)
	if err != nil {
		return verdict{}, err
	}
	msg := fmt.Sprintf("head %s signed by %s", shortHash(head), signer)
	if v.cfg.Mode != ModeStrict {
		return verdict{signer: signer, message: msg}, nil
	}
	// Read on every verification, never cached: replicas share it, and a
	// lost or damaged anchor must refuse rather than restart the chain.
	last, err := v.cfg.Anchor.LoadAnchor(ctx)
	if err != nil {
		return verdict{}, &RefusedError{Reason: ReasonStateUnavailable, Commit: head,
			Err: fmt.Errorf("strict verification anchor: %w", err)}
	}
	from, what := last, "the last accepted commit"
	if from == "" {
		if v.cfg.TrustRoot == "" {
			return verdict{}, &RefusedError{Reason: ReasonNoAnchor, Commit: head,
				Err: fmt.Errorf("%w: no commit was accepted yet and no trust root is configured (name one with --verify-trust-root)", ErrNoAnchor)}
		}
		from, what = v.cfg.TrustRoot, "the trust root"
	}
	if from == head && last == "" {
		msg += "; it is the trust root"
	}
	if from != head {
		commits, err := v.cfg.Commits.CommitsBetween(ctx, from, head)
		if errors.Is(err, gitrepo.ErrNotAncestor) {
			return verdict{}, &RefusedError{Reason: ReasonHistoryRewritten, Commit: head,
				Err: fmt.Errorf("%s %s is not an ancestor: %w", what, shortHash(from), err)}
		}
		if err != nil {
			return verdict{}, &RefusedError{Reason: ReasonGitError, Commit: head, Err: err}
		}
		for _, c := range commits {
			if c.Hash == head {
				continue
			}
			if _, err := check(c, keys); err != nil {
				return verdict{}, err
			}
		}
		msg += fmt.Sprintf("; all %d commits since %s %s are signed by trusted keys", len(commits), what, shortHash(from))
	}
	if head != last {
		if err := v.cfg.Anchor.StoreAnchor(ctx, head); err != nil {
			// The head is verified; a restart re-checks from the older
			// anchor (a longer range, never a shorter one).
			msg += fmt.Sprintf(" (anchor not recorded: %v)", err)
		}
	}
	return verdict{signer: signer, message: msg}, nil
}

// check verifies one commit's signature.
func check(c gitrepo.Commit, keys *signature.KeyRing) (string, error) {
	ver, err := c.Verify(keys)
	if err == nil {
		id := ver.Identity
		if id == "" {
			id = ver.Format + " key"
		}
		return fmt.Sprintf("%s (%s %s)", id, ver.Format, ver.Fingerprint), nil
	}
	reason := ReasonBadSignature
	switch {
	case errors.Is(err, signature.ErrUnsigned):
		reason = ReasonUnsigned
	case errors.Is(err, signature.ErrUntrustedSigner):
		reason = ReasonUntrustedSigner
	}
	return "", &RefusedError{Reason: reason, Commit: c.Hash, Err: err}
}

// loadKeys reads KeysDir, parsing it again only when its content changed.
func (v *Verifier) loadKeys() (*signature.KeyRing, error) {
	sum, err := dirDigest(v.cfg.KeysDir)
	if err != nil {
		return nil, err
	}
	if sum != v.keysSum || v.keys == nil {
		keys, err := signature.LoadKeyRing(v.cfg.KeysDir)
		if err != nil {
			return nil, err
		}
		v.keys, v.keysSum = keys, sum
	}
	if v.keys.Len() == 0 {
		return nil, fmt.Errorf("no trusted keys in %s", v.cfg.KeysDir)
	}
	return v.keys, nil
}

// dirDigest hashes the names and contents of a directory's regular files
// (following symlinks, as a Secret volume's are), skipping dotfiles like
// LoadKeyRing.
func dirDigest(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("trusted keys: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // replaced while we read: the next call sees the new content
			}
			var pe *fs.PathError
			if errors.As(err, &pe) && isDirError(pe) {
				continue
			}
			return "", fmt.Errorf("trusted keys: %w", err)
		}
		fmt.Fprintf(h, "%d:%s\x00%d:", len(n), n, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func isDirError(pe *fs.PathError) bool {
	fi, err := os.Stat(pe.Path)
	return err == nil && fi.IsDir()
}

func validHash(h string) bool {
	if len(h) != 40 && len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
