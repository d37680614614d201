package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/hub/notify"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

// forgeTokenEnv holds the forge's API token: an environment variable, so
// that it never shows in a process list or a job's log.
const forgeTokenEnv = "FLOTILLA_FORGE_TOKEN"

// forgeFlags name the fleet repo's forge (notify, plan --comment-on).
type forgeFlags struct {
	kind, url, repo string
}

func (o *forgeFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&o.kind, "forge", "", "the fleet repo's forge: github, gitlab or gitea")
	f.StringVar(&o.url, "forge-url", "", "the forge's base URL, e.g. https://github.com")
	f.StringVar(&o.repo, "forge-repo", "", "the fleet repo on the forge: owner/name, or GitLab's project path")
}

// client is the forge's API client, with the token of $FLOTILLA_FORGE_TOKEN.
func (o *forgeFlags) client(timeout time.Duration) (*forge.Client, error) {
	return forge.New(forge.Options{Kind: o.kind, URL: o.url, Repo: o.repo, Token: os.Getenv(forgeTokenEnv), Timeout: timeout})
}

type notifyOptions struct {
	status       rolloutOptions
	forge        forgeFlags
	commit       string
	dashboardURL string
	recordRepo   string
	dryRun       bool
}

func newNotifyCommand() *cobra.Command {
	o := &notifyOptions{status: rolloutOptions{now: time.Now}}
	c := &cobra.Command{
		Use:   "notify",
		Short: "Set commit statuses on the fleet repo's forge: where each application of main's head stands on its clusters",
		Long: `notify reads the fleet repo (--repo, a clone at main's head) and the clusters'
status refs, and sets one commit status per application on the head commit
through the forge's API (GitHub, GitLab or Gitea), with the context
flotilla/<application>:

  pending  its clusters are applying it ("2/5 Ready; applying on edge-1"),
           or a rollout holds it at a wave ("held at wave rest")
  success  every cluster the commit's slices give it to is Ready at it
  failure  a cluster failed it, named with the reason

with a link to the dashboard when --dashboard-url is set. Each change of a
status is sent once: what was sent is recorded on the fleet repo's own ref
refs/flotilla/notify (compare-and-swap), so the rollout job, which follows
the status refs after a merge, and its schedule can both run notify. A send
that fails is retried by the next run.

The forge's API token is read from $FLOTILLA_FORGE_TOKEN; it is also the
password of the pushes to refs/flotilla/notify unless --git-credentials-dir
gives other credentials.

Exit codes: 0 statuses are up to date, 2 an error (a failed send included).`,
		Example: `  # In the template's rollout job (GitHub Actions)
  FLOTILLA_FORGE_TOKEN=$GITHUB_TOKEN flotilla notify --forge github \
    --forge-url "$GITHUB_SERVER_URL" --forge-repo "$GITHUB_REPOSITORY"

  # What would be sent, without sending
  flotilla notify --forge gitea --forge-url https://gitea.example.com --forge-repo ops/fleet --dry-run -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runNotify(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), o)
		},
	}
	o.status.bind(c)
	f := c.Flags()
	o.forge.bind(f)
	f.StringVar(&o.commit, "commit", "HEAD", "the commit of --repo to set statuses on")
	f.StringVar(&o.dashboardURL, "dashboard-url", "", "the dashboard's URL, linked from every status")
	f.StringVar(&o.recordRepo, "record-repo", "", "where refs/flotilla/notify is kept: a URL (default: --repo's origin)")
	f.BoolVar(&o.dryRun, "dry-run", false, "compute the statuses and print them; send and record nothing")
	return c
}

func runNotify(ctx context.Context, stdout, stderr io.Writer, o *notifyOptions) error {
	root, repo, err := o.status.load(ctx)
	if err != nil {
		return err
	}
	head, err := gitrepo.ReadCommit(root, o.commit)
	if err != nil {
		return fmt.Errorf("--commit %s: %w", o.commit, err)
	}
	docs, err := o.status.documents(ctx, root, repo)
	if err != nil {
		return err
	}
	apps, err := notify.Observe(repo, fleetrender.CommittedAt(root), docs, o.status.now())
	if err != nil {
		return err
	}
	statuses := make([]forge.CommitStatus, len(apps))
	for i, a := range apps {
		statuses[i] = notify.Summarize(head.Hash, a, o.dashboardURL)
	}
	if o.dryRun {
		return writeStatuses(stdout, statuses, o.status.output)
	}
	client, err := o.forge.client(o.status.timeout)
	if err != nil {
		return err
	}
	rec := &notify.Recorder{Remote: o.recordRepo, Author: gitrepo.Signature{Name: "flotilla notify", Email: "notify@flotilla.dev"}}
	if rec.Remote == "" {
		if rec.Remote, err = gitrepo.RemoteURL(root, "origin"); err != nil {
			return fmt.Errorf("--record-repo: %w", err)
		}
	}
	if o.status.authDir != "" {
		if rec.Auth, err = gitrepo.LoadAuth(o.status.authDir); err != nil {
			return err
		}
	} else {
		rec.Auth = gitrepo.Auth{Username: "flotilla", Password: os.Getenv(forgeTokenEnv)}
	}
	sent, err := notify.Send(ctx, client, rec, statuses)
	for _, s := range sent {
		fmt.Fprintf(stderr, "set %s %s on %s: %s\n", s.Context, s.State, shortRev(s.Commit), s.Description)
	}
	if err != nil {
		return err
	}
	if len(sent) == 0 {
		fmt.Fprintf(stderr, "statuses of %s up to date (%d)\n", shortRev(head.Hash), len(statuses))
	}
	return nil
}

func writeStatuses(w io.Writer, statuses []forge.CommitStatus, format string) error {
	if ok, err := writeMachine(w, statuses, format); ok {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTEXT\tSTATE\tDESCRIPTION")
	for _, s := range statuses {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Context, s.State, strings.ReplaceAll(s.Description, "\t", " "))
	}
	return tw.Flush()
}
