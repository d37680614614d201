package gitrepo

import (
	"context"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// SetMaxPacks lowers the compaction threshold so a test needs few commits.
func SetMaxPacks(n int) (restore func()) {
	old := maxPacks
	maxPacks = n
	return func() { maxPacks = old }
}

// ErrNeedsWalk is errNeedsWalk, for tests of PushSlicesExact.
var ErrNeedsWalk = errNeedsWalk

// PushSlices pushes the clone's slice refs as PublishSlices does after its
// cut (pushSlicesExpecting: the exact pack, the walk when the remote lacks
// a commit it assumes), expecting the remote's slice refs as they are.
func PushSlices(ctx context.Context, repoDir, remote string, auth Auth) error {
	ep, repo, err := openForPush(repoDir, remote, auth)
	if err != nil {
		return err
	}
	refs, err := listRefs(ctx, ep, time.Minute)
	if err != nil {
		return err
	}
	expected := map[plumbing.ReferenceName]plumbing.Hash{}
	for name, h := range refs {
		if strings.HasPrefix(name, SliceRefPrefix) {
			expected[plumbing.ReferenceName(name)] = h
		}
	}
	_, _, err = pushSlicesExpecting(ctx, repo, ep, time.Minute, expected)
	return err
}

// PushSlicesExact is PushSlices without the walking fallback, so a test
// can tell which pushes need none.
func PushSlicesExact(ctx context.Context, repoDir, remote string, auth Auth) error {
	ep, repo, err := openForPush(repoDir, remote, auth)
	if err != nil {
		return err
	}
	return pushSlicesExact(ctx, repo.Storer, ep, nil)
}

func openForPush(repoDir, remote string, auth Auth) (*endpoint, *git.Repository, error) {
	ep, err := auth.endpoint(remote, time.Minute)
	if err != nil {
		return nil, nil, err
	}
	repo, err := git.PlainOpen(repoDir)
	return ep, repo, err
}

// WithBeforePush is o running f between PublishSlices' cut and its push
// (a race with another publish).
func WithBeforePush(o PublishOptions, f func()) PublishOptions {
	o.beforePush = f
	return o
}
