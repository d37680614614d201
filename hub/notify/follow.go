package notify

import (
	"context"
	"errors"
	"strings"

	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

// maxFollowed bounds the earlier commits whose statuses one run updates.
const maxFollowed = 20

// Follow gives the earlier commits still pending the head's statuses when
// nothing but rendered/ changed between them and the head: the commits
// after a merge that only release waves (rollout advance), abort or pause
// a rollout carry the merge's change on, so the merged commit's status,
// which people watch, goes on to success or failure with its rollout
// instead of staying pending at its first wave. A commit followed by a
// change of the fleet repo's inputs keeps its last status.
func Follow(ctx context.Context, repoDir, head string, pending, headStatuses []forge.CommitStatus) ([]forge.CommitStatus, error) {
	byContext := map[string]forge.CommitStatus{}
	for _, s := range headStatuses {
		byContext[s.Context] = s
	}
	carries := map[string]bool{}
	var out []forge.CommitStatus
	for _, p := range pending {
		if p.Commit == head {
			continue
		}
		now, ok := byContext[p.Context]
		if !ok {
			continue
		}
		follows, seen := carries[p.Commit]
		if !seen {
			if len(carries) == maxFollowed {
				break
			}
			var err error
			if follows, err = onlyRendered(ctx, repoDir, p.Commit, head); err != nil {
				return out, err
			}
			carries[p.Commit] = follows
		}
		if follows {
			now.Commit = p.Commit
			out = append(out, now)
		}
	}
	return out, nil
}

// onlyRendered reports whether from is an ancestor of to and the commits
// between changed nothing outside rendered/.
func onlyRendered(ctx context.Context, repoDir, from, to string) (bool, error) {
	if _, err := gitrepo.CommitsBetweenLocal(ctx, repoDir, from, to); err != nil {
		if errors.Is(err, gitrepo.ErrNotAncestor) || errors.Is(err, gitrepo.ErrRevisionNotFound) {
			return false, nil
		}
		return false, err
	}
	changed, err := gitrepo.ChangedFiles(ctx, repoDir, from, to)
	if err != nil {
		return false, err
	}
	for _, f := range changed {
		if !strings.HasPrefix(f, "rendered/") {
			return false, nil
		}
	}
	return true, nil
}
