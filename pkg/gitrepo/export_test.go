package gitrepo

import (
	"context"
	"time"

	git "github.com/go-git/go-git/v5"
)

// SetMaxPacks lowers the compaction threshold so a test needs few commits.
func SetMaxPacks(n int) (restore func()) {
	old := maxPacks
	maxPacks = n
	return func() { maxPacks = old }
}

// ErrNeedsWalk is errNeedsWalk, for tests of PushSlicesExact.
var ErrNeedsWalk = errNeedsWalk

// PushSlicesExact is PushSlices without the walking fallback, so a test
// can tell which pushes need none.
func PushSlicesExact(ctx context.Context, repoDir, remote string, auth Auth) error {
	ep, err := auth.endpoint(remote, time.Minute)
	if err != nil {
		return err
	}
	repo, err := git.PlainOpen(repoDir)
	if err != nil {
		return err
	}
	return pushSlicesExact(ctx, repo.Storer, ep, nil)
}

// SetBeforeSlicePush runs f between PublishSlices' cut and its push (a
// race with another publish), until the test ends.
func SetBeforeSlicePush(t interface{ Cleanup(func()) }, f func()) {
	beforeSlicePush = f
	t.Cleanup(func() { beforeSlicePush = nil })
}
