package cmd

import (
	"context"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

type publishOptions struct {
	repo    string
	rev     string
	branch  string
	remote  string
	authDir string
	timeout time.Duration
}

func newPublishCommand() *cobra.Command {
	o := &publishOptions{}
	c := &cobra.Command{
		Use:   "publish",
		Short: "Publish each cluster's slice of a merged commit on its own ref",
		Long: `publish cuts, from a commit of main, one slice commit per cluster and
points refs/flotilla/slices/<cluster> at it: its tree is the commit's tree
pruned to rendered/<bucket>/<cluster>/ and the sources the cluster's units
read (their inputs and Helm charts), so an agent run with --git-transport
slice fetches about what it runs, whatever the size of the fleet. Shared
sources are the same Git objects as on main and are stored once.

Each slice commit names the main commit it was cut from (trailer
Flotilla-Source) and carries that commit's raw object and main's raw tree
objects along the pruned paths: the agent recomputes their hashes, checks
that every file it received is main's, and verifies the main commit's
signature. Publishing needs no signing key and no trust: a publisher that
alters a slice is refused by every agent.

Run it in CI after every merge to main (the ref of an agent that follows
slices moves only when publish runs). It is idempotent, and a slice commit
is a child of the ref's previous one, so agents fetch only what changed.

With --remote, publish starts from the remote's slice refs (fetching what
the clone lacks), cuts from the remote's head of --branch only, and pushes
every moved ref and deletes the refs of clusters that left clusters/ in
one atomic push whose expected old values are what it listed: a run that
lost a race with a newer merge pushes nothing ("superseded"), and one that
raced another publish starts over, so no slice ever moves backwards.`,
		Example: `  # In CI after a merge: cut slices of the checked-out main and push them
  flotilla publish --repo . --remote https://git.example.com/fleet.git \
    --git-credentials-dir /var/run/secrets/git

  # The same, to the clone's remote "origin"
  flotilla publish --remote origin --git-credentials-dir /var/run/secrets/git

  # Cut only, into the local repository (push later with git push)
  flotilla publish --repo ./fleet --rev main`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runPublish(c.Context(), c.OutOrStdout(), o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.repo, "repo", ".", "fleet repo directory (a clone; the slice refs are written into it)")
	f.StringVar(&o.rev, "rev", "HEAD", "the commit of main to cut the slices from")
	f.StringVar(&o.branch, "branch", "main", "with --remote: the remote's branch whose head alone is published")
	f.StringVar(&o.remote, "remote", "", "push the slice refs to this URL, or to the URL of this remote of --repo (default: cut only)")
	f.StringVar(&o.authDir, "git-credentials-dir", "", "directory with Git credentials for --remote (files username, password, bearerToken, identity, known_hosts, ca.crt)")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound on the push")
	return c
}

func runPublish(ctx context.Context, out io.Writer, o *publishOptions) error {
	hash, err := gitrepo.ResolveRevision(o.repo, o.rev)
	if err != nil {
		return err
	}
	paths, err := slicePaths(ctx, o.repo, hash)
	if err != nil {
		return err
	}
	if o.remote == "" {
		cut, err := gitrepo.CutSlices(o.repo, hash, paths)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "cut %d slices of %s\n", len(cut), hash)
		return nil
	}
	remote := o.remote
	if !strings.Contains(remote, "://") && !strings.Contains(remote, ":") {
		// A remote's name, as git push takes it.
		if remote, err = gitrepo.RemoteURL(o.repo, o.remote); err != nil {
			return fmt.Errorf("--remote %q: %w", o.remote, err)
		}
	}
	var auth gitrepo.Auth
	if o.authDir != "" {
		if auth, err = gitrepo.LoadAuth(o.authDir); err != nil {
			return err
		}
	}
	res, err := gitrepo.PublishSlices(ctx, gitrepo.PublishOptions{
		RepoDir: o.repo, Remote: remote, Auth: auth, Timeout: o.timeout, Branch: o.branch, Rev: hash, Paths: paths,
	})
	if err != nil {
		return err
	}
	if res.Superseded {
		fmt.Fprintf(out, "superseded: %s is at %s, not %s; its own publish moves the slices, nothing pushed\n", o.branch, res.Head, hash)
		return nil
	}
	fmt.Fprintf(out, "cut %d slices of %s, pushed %d slice refs, deleted %d (%s)\n",
		len(res.Cut), hash, len(res.Moved), len(res.Deleted), strings.Join(res.Deleted, ", "))
	return nil
}

// slicePaths reads every cluster's slice.yaml of commit hash and returns
// cluster → the repo paths its slice holds.
func slicePaths(ctx context.Context, repo, hash string) (map[string][]string, error) {
	files, err := gitrepo.ListTree(ctx, repo, hash, slice.RenderedDir)
	if err != nil {
		return nil, err
	}
	var hashes []string
	var clusters []string
	for _, f := range files {
		cluster := path.Base(path.Dir(f.Path))
		if path.Base(f.Path) == slice.FileName && slice.SlicePath(cluster) == f.Path {
			hashes = append(hashes, f.Hash)
			clusters = append(clusters, cluster)
		}
	}
	blobs, err := gitrepo.ReadBlobs(ctx, repo, hashes)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i, cluster := range clusters {
		s, err := slice.Parse(blobs[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", slice.SlicePath(cluster), err)
		}
		if s.Cluster != cluster {
			return nil, fmt.Errorf("%s: cluster %q, want %q: %w", slice.SlicePath(cluster), s.Cluster, cluster, slice.ErrInvalidSlice)
		}
		paths := s.RepoPaths()
		for _, x := range s.RepoExclusions() {
			paths = append(paths, gitrepo.PathExclude+x)
		}
		out[cluster] = paths
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no slice under %s/", hash, slice.RenderedDir)
	}
	return out, nil
}
