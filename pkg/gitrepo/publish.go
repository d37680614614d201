package gitrepo

// Publishing slices to a remote as one job: start from the remote's slice
// refs, cut, push the moved refs and delete those of clusters that left,
// with the remote's values as the expected old values, so that a publish
// that raced another one never moves a slice backwards.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// PublishOptions says what PublishSlices publishes where.
type PublishOptions struct {
	// RepoDir is a local clone holding Rev (its slice refs are rewritten).
	RepoDir string
	// Remote is the URL the slices are pushed to.
	Remote  string
	Auth    Auth
	Timeout time.Duration // per network operation; DefaultTimeout when zero
	// Branch is main's branch on Remote; the slices are cut only from its
	// head.
	Branch string
	// Rev is the commit of main to cut from.
	Rev string
	// Paths maps each cluster of Rev to the repo paths of its slice.
	Paths map[string][]string

	// beforePush, set by a test (WithBeforePush), runs between each cut
	// and its push.
	beforePush func()
}

// Published is what PublishSlices did.
type Published struct {
	// Head is the remote's branch head when the slices were cut.
	Head string
	// Superseded: Rev is no longer the branch's head; the publish of the
	// newer head moves the slices, this one left them.
	Superseded bool
	Cut        map[string]string // cluster → slice commit
	Moved      []string          // clusters whose ref was pushed
	Deleted    []string          // clusters whose ref was deleted (no longer in Paths)
}

// errSlicesMoved: a remote slice ref changed between the listing and the
// push (another publish ran).
var errSlicesMoved = errors.New("slice refs moved on the remote")

// PublishSlices cuts each cluster's slice of o.Rev as a child of the
// remote's slice commit and pushes every ref that moved, deleting the
// refs of clusters not in o.Paths, in one atomic push whose expected old
// values are the remote's. It publishes only the remote branch's head: an
// older Rev (a run that lost a race with a newer merge) is Superseded and
// pushes nothing. A push that finds the refs moved by another publish
// starts over from the new values, a few times.
func PublishSlices(ctx context.Context, o PublishOptions) (Published, error) {
	ep, err := o.Auth.endpoint(o.Remote, timeoutOr(o.Timeout))
	if err != nil {
		return Published{}, err
	}
	repo, err := git.PlainOpen(o.RepoDir)
	if err != nil {
		return Published{}, fmt.Errorf("open %s: %w", o.RepoDir, err)
	}
	rev, err := repo.ResolveRevision(plumbing.Revision(o.Rev))
	if err != nil {
		return Published{}, fmt.Errorf("%w: %s: %w", ErrRevisionNotFound, o.Rev, err)
	}
	branch := plumbing.NewBranchReferenceName(o.Branch)
	if o.Branch == "" {
		branch = plumbing.NewBranchReferenceName("main")
	}
	const attempts = 4
	for i := 0; ; i++ {
		refs, err := listRefs(ctx, ep, o.Timeout)
		if err != nil {
			return Published{}, err
		}
		head, ok := refs[branch.String()]
		if !ok {
			return Published{}, fmt.Errorf("ls-remote %s: %w: %s", ep.redacted, ErrRefNotFound, branch)
		}
		out := Published{Head: head.String()}
		if head != *rev {
			out.Superseded = true
			return out, nil
		}
		remote := map[plumbing.ReferenceName]plumbing.Hash{}
		for name, h := range refs {
			if strings.HasPrefix(name, SliceRefPrefix) {
				remote[plumbing.ReferenceName(name)] = h
			}
		}
		if err := mirrorSliceRefs(ctx, repo, ep, o.Timeout, remote); err != nil {
			return Published{}, err
		}
		if out.Cut, err = CutSlices(o.RepoDir, rev.String(), o.Paths); err != nil {
			return Published{}, err
		}
		if o.beforePush != nil {
			o.beforePush()
		}
		// Opened again: the cut wrote a pack this handle's storage has not
		// indexed.
		if repo, err = git.PlainOpen(o.RepoDir); err != nil {
			return Published{}, fmt.Errorf("open %s: %w", o.RepoDir, err)
		}
		out.Moved, out.Deleted, err = pushSlicesExpecting(ctx, repo, ep, o.Timeout, remote)
		if errors.Is(err, errSlicesMoved) && i+1 < attempts {
			continue
		}
		if errors.Is(err, errSlicesMoved) {
			return Published{}, fmt.Errorf("push %s: %w: %w", ep.redacted, ErrConflict, err)
		}
		return out, err
	}
}

// mirrorSliceRefs makes the local slice refs the remote's values,
// fetching the commits the clone lacks (depth 1: a new slice commit needs
// its parent's tree, not its history).
func mirrorSliceRefs(ctx context.Context, repo *git.Repository, ep *endpoint, timeout time.Duration, remote map[plumbing.ReferenceName]plumbing.Hash) error {
	var specs []config.RefSpec
	for name, h := range remote {
		if _, err := repo.CommitObject(h); err != nil {
			specs = append(specs, config.RefSpec("+"+name.String()+":"+name.String()))
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i] < specs[j] })
	if len(specs) > 0 {
		if err := fetchInto(ctx, repo.Storer, ep, timeout, specs, 1); err != nil {
			return err
		}
	}
	local, err := hashRefs(repo.Storer, SliceRefPrefix)
	if err != nil {
		return err
	}
	for _, r := range local {
		if _, ok := remote[r.Name()]; !ok {
			if err := repo.Storer.RemoveReference(r.Name()); err != nil {
				return err
			}
		}
	}
	for name, h := range remote {
		if err := repo.Storer.SetReference(plumbing.NewHashReference(name, h)); err != nil {
			return err
		}
	}
	return nil
}

// pushSlicesExpecting pushes the local slice refs that differ from
// expected (the remote's values they were cut against) and deletes the
// remote's slice refs the clone no longer has, atomically when the server
// can. A remote whose refs are no longer expected is errSlicesMoved,
// before the push or, when the server refused it, after.
func pushSlicesExpecting(ctx context.Context, repo *git.Repository, ep *endpoint, timeout time.Duration, expected map[plumbing.ReferenceName]plumbing.Hash) (moved, deleted []string, err error) {
	opCtx, cancel := context.WithTimeout(ctx, timeoutOr(timeout))
	defer cancel()
	err = pushSlicesExact(opCtx, repo.Storer, ep, expected)
	if errors.Is(err, errNeedsWalk) {
		// The remote lacks a commit the exact pack assumes: let go-git
		// walk, still without forcing, so a raced ref is refused.
		err = pushSlicesWalk(opCtx, repo, ep, expected)
	}
	if err != nil && !errors.Is(err, errSlicesMoved) {
		now, lerr := listRefs(ctx, ep, timeout)
		switch {
		case lerr == nil && sameAsLocal(repo, now):
			err = nil // it landed; its report was lost
		case lerr == nil && !sameSliceRefs(now, expected):
			err = fmt.Errorf("%w: %w", errSlicesMoved, err)
		default:
			err = classify(ctx, "push", ep.redacted, err)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	changed, gone, err := sliceChanges(repo.Storer, expected)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range changed {
		moved = append(moved, strings.TrimPrefix(r.Name().String(), SliceRefPrefix))
	}
	for _, name := range gone {
		deleted = append(deleted, strings.TrimPrefix(name.String(), SliceRefPrefix))
	}
	return moved, deleted, nil
}

// sliceChanges compares the clone's slice refs with expected (the
// remote's): the refs whose value differs, and the names the clone no
// longer has, both sorted.
func sliceChanges(st storer.ReferenceStorer, expected map[plumbing.ReferenceName]plumbing.Hash) (changed []*plumbing.Reference, gone []plumbing.ReferenceName, err error) {
	local, err := hashRefs(st, SliceRefPrefix)
	if err != nil {
		return nil, nil, err
	}
	have := map[plumbing.ReferenceName]bool{}
	for _, r := range local {
		have[r.Name()] = true
		if expected[r.Name()] != r.Hash() {
			changed = append(changed, r)
		}
	}
	for name := range expected {
		if !have[name] {
			gone = append(gone, name)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i] < gone[j] })
	return changed, gone, nil
}

// pushSlicesWalk is the go-git push of the moved and deleted slice refs,
// fast-forward only.
func pushSlicesWalk(ctx context.Context, repo *git.Repository, ep *endpoint, expected map[plumbing.ReferenceName]plumbing.Hash) error {
	changed, gone, err := sliceChanges(repo.Storer, expected)
	if err != nil {
		return err
	}
	var specs []config.RefSpec
	for _, r := range changed {
		specs = append(specs, config.RefSpec(r.Name().String()+":"+r.Name().String()))
	}
	for _, name := range gone {
		specs = append(specs, config.RefSpec(":"+name.String()))
	}
	if len(specs) == 0 {
		return nil
	}
	rem := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{ep.url}})
	err = rem.PushContext(ctx, &git.PushOptions{RefSpecs: specs, Auth: ep.auth, CABundle: ep.caBundle, Atomic: true})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	return err
}

// sameSliceRefs: the remote's slice refs in refs are exactly want.
func sameSliceRefs(refs map[string]plumbing.Hash, want map[plumbing.ReferenceName]plumbing.Hash) bool {
	n := 0
	for name, h := range refs {
		if !strings.HasPrefix(name, SliceRefPrefix) {
			continue
		}
		n++
		if want[plumbing.ReferenceName(name)] != h {
			return false
		}
	}
	return n == len(want)
}

// sameAsLocal: the remote's slice refs are the clone's (the push landed
// although its report was lost).
func sameAsLocal(repo *git.Repository, refs map[string]plumbing.Hash) bool {
	now := map[plumbing.ReferenceName]plumbing.Hash{}
	for name, h := range refs {
		if strings.HasPrefix(name, SliceRefPrefix) {
			now[plumbing.ReferenceName(name)] = h
		}
	}
	changed, gone, err := sliceChanges(repo.Storer, now)
	return err == nil && len(changed) == 0 && len(gone) == 0
}

// atomicIfSupported asks for an all-or-nothing push when the server
// offers it.
func atomicIfSupported(adv, req *capability.List) {
	if adv.Supports(capability.Atomic) {
		_ = req.Set(capability.Atomic)
	}
}
