package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrRemoteNotConfigured: a local repository has no remote of that name.
var ErrRemoteNotConfigured = errors.New("git remote not configured")

// ErrRepoExists: InitRepository found a repository already there.
var ErrRepoExists = errors.New("git repository already exists")

// InitRepository makes dir a new Git repository whose branch holds one
// commit of every file under dir (.gitignore respected), and returns the
// commit hash. An empty author name or email is taken from the user's
// global Git configuration, else "Flotilla <flotilla@localhost>". A
// repository already in dir is ErrRepoExists; nothing is changed then.
func InitRepository(ctx context.Context, dir, branch, message string, author Signature) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if branch == "" {
		branch = "main"
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if err := ref.Validate(); err != nil {
		return "", fmt.Errorf("init repository: branch %q: %w", branch, err)
	}
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: ref}})
	if errors.Is(err, git.ErrRepositoryAlreadyExists) {
		return "", fmt.Errorf("init repository %s: %w", dir, ErrRepoExists)
	}
	if err != nil {
		return "", fmt.Errorf("init repository %s: %w", dir, err)
	}
	wt, err := r.Worktree()
	if err != nil {
		return "", fmt.Errorf("init repository %s: %w", dir, err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return "", fmt.Errorf("init repository %s: stage files: %w", dir, err)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	author = withDefaultIdentity(author)
	sig := &object.Signature{Name: author.Name, Email: author.Email, When: author.When}
	h, err := wt.Commit(message, &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true})
	if err != nil {
		return "", fmt.Errorf("init repository %s: commit: %w", dir, err)
	}
	return h.String(), nil
}

// withDefaultIdentity fills what a caller left empty, as `git commit` does.
func withDefaultIdentity(s Signature) Signature {
	if s.Name == "" || s.Email == "" {
		if cfg, err := config.LoadConfig(config.GlobalScope); err == nil {
			if s.Name == "" {
				s.Name = cfg.User.Name
			}
			if s.Email == "" {
				s.Email = cfg.User.Email
			}
		}
	}
	if s.Name == "" {
		s.Name = "Flotilla"
	}
	if s.Email == "" {
		s.Email = "flotilla@localhost"
	}
	if s.When.IsZero() {
		s.When = time.Now()
	}
	return s
}

// RemoteURL is the (first) URL of the named remote of the local repository
// containing dir, e.g. "origin"; ErrRemoteNotConfigured when it has none.
func RemoteURL(dir, name string) (string, error) {
	r, err := openLocal(dir)
	if err != nil {
		return "", err
	}
	rem, err := r.Remote(name)
	if errors.Is(err, git.ErrRemoteNotFound) || (err == nil && len(rem.Config().URLs) == 0) {
		return "", fmt.Errorf("remote %q of %s: %w", name, dir, ErrRemoteNotConfigured)
	}
	if err != nil {
		return "", fmt.Errorf("remote %q of %s: %w", name, dir, err)
	}
	return rem.Config().URLs[0], nil
}
