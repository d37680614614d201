package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/memory"
)

// DefaultTimeout bounds each network operation when none is configured.
const DefaultTimeout = 60 * time.Second

func timeoutOr(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTimeout
	}
	return d
}

// listRefs is ls-remote: one GET of info/refs over HTTP, no pack.
func listRefs(ctx context.Context, ep *endpoint, timeout time.Duration) (map[string]plumbing.Hash, error) {
	opCtx, cancel := context.WithTimeout(ctx, timeoutOr(timeout))
	defer cancel()
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{ep.url}})
	refs, err := rem.ListContext(opCtx, &git.ListOptions{Auth: ep.auth, CABundle: ep.caBundle})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return map[string]plumbing.Hash{}, nil
	}
	if err != nil {
		return nil, classify(ctx, "ls-remote", ep.redacted, err)
	}
	out := make(map[string]plumbing.Hash, len(refs))
	for _, r := range refs {
		if r.Type() == plumbing.HashReference {
			out[r.Name().String()] = r.Hash()
		}
	}
	return out, nil
}

// fetchInto fetches specs into st. A missing ref or an empty remote is
// ErrRefNotFound; "already up to date" is not an error.
func fetchInto(ctx context.Context, st storage.Storer, ep *endpoint, timeout time.Duration, specs []config.RefSpec, depth int) error {
	return fetchLimited(ctx, st, ep, timeout, specs, depth, 0)
}

// fetchLimited is fetchInto that fails with ErrTooLarge once the pack
// exceeds maxSize bytes (no limit when maxSize <= 0).
func fetchLimited(ctx context.Context, st storage.Storer, ep *endpoint, timeout time.Duration, specs []config.RefSpec, depth int, maxSize int64) error {
	opCtx, cancel := context.WithTimeout(ctx, timeoutOr(timeout))
	defer cancel()
	rem := git.NewRemote(limitFetch(st, maxSize), &config.RemoteConfig{Name: "origin", URLs: []string{ep.url}})
	err := rem.FetchContext(opCtx, &git.FetchOptions{
		RefSpecs: specs,
		Depth:    depth,
		Tags:     git.NoTags,
		Force:    true,
		Auth:     ep.auth,
		CABundle: ep.caBundle,
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case errors.Is(err, ErrTooLarge):
		// Not an outage, whatever the aborted transfer made the transport say.
		return fmt.Errorf("fetch %s: %w", ep.redacted, err)
	case errors.As(err, new(git.NoMatchingRefSpecError)), errors.Is(err, transport.ErrEmptyRemoteRepository):
		return classify(ctx, "fetch", ep.redacted, fmt.Errorf("%w: %w", ErrRefNotFound, err))
	}
	return classify(ctx, "fetch", ep.redacted, err)
}

// isTransportError tells network, auth and not-found failures (which a
// fresh cache would not fix) from local ones.
func isTransportError(err error) bool {
	return errors.Is(err, ErrUnreachable) || errors.Is(err, ErrAuth) ||
		errors.Is(err, ErrRepoNotFound) || errors.Is(err, ErrRefNotFound) ||
		errors.Is(err, ErrTooLarge) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
