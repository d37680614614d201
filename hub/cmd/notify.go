package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
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
	status         rolloutOptions
	forge          forgeFlags
	commit         string
	dashboardURL   string
	recordRepo     string
	dryRun         bool
	credentialsDir string
	maxEvents      int
	exitCode       bool
}

func newNotifyCommand() *cobra.Command {
	o := &notifyOptions{status: rolloutOptions{now: time.Now}}
	c := &cobra.Command{
		Use:   "notify",
		Short: "Tell people where the fleet stands: commit statuses on the forge, events to webhooks",
		Long: `notify reads the fleet repo (--repo, a clone at main's head) and the clusters'
status refs, and tells what changed since its last run.

Commit statuses (with --forge): one per application on the head commit,
through the forge's API (GitHub, GitLab or Gitea), with the context
flotilla/<application>:

  pending  its clusters are applying it ("2/5 Ready; applying on edge-1"),
           or a rollout holds it at a wave ("held at wave rest")
  success  every cluster the commit's slices give it to is Ready at it
  failure  a cluster failed it, named with the reason

with a link to the dashboard when --dashboard-url is set. An earlier commit
whose statuses were left pending gets the head's when only rendered/ changed
since (rollout advances carry its change on), so a merged commit's status
follows its rollout to success or failure.

Events (when the fleet repo has a Provider and an Alert in notifications/):
a cluster turns Failing, DecryptionFailed, Unreachable, Untrusted,
ClockSkew, Conflict or PruneHeld, and Recovered; a rollout's WaveReleased,
WaveHeld, RolloutPaused, RolloutAborted and RolloutComplete. They go to
generic JSON webhooks (Flux's event shape; generic-hmac signs the body in
X-Signature), Slack and Teams, filtered by each Alert's sources (fleets,
applications, clusters), severity and reasons. A provider's secret (the
webhook URL, the HMAC key) is read from $FLOTILLA_NOTIFY_<NAME>_ADDRESS and
_TOKEN or from --credentials-dir, never from the repo, and never logged. A
provider's first run tells what is wrong now, not what went well before.

Each change is told once: what was sent is recorded on the fleet repo's own
ref refs/flotilla/notify (compare-and-swap), so the rollout job, which
follows the status refs after a merge, and its schedule can both run notify,
and a restart repeats nothing. A send that fails is told again by the next
run; at most --max-events events go to one provider per run, spaced about a
second apart after a burst of five.

The forge's API token is read from $FLOTILLA_FORGE_TOKEN; it is also the
password of the pushes to refs/flotilla/notify unless --git-credentials-dir
gives other credentials.

Exit codes: 0 everything told is up to date, 1 (with --exit-code) a status
is pending, 2 an error (a failed send included).`,
		Example: `  # In the template's rollout job (GitHub Actions)
  FLOTILLA_FORGE_TOKEN=$GITHUB_TOKEN flotilla notify --forge github \
    --forge-url "$GITHUB_SERVER_URL" --forge-repo "$GITHUB_REPOSITORY"

  # Events only (no commit statuses), the Slack webhook's URL from the environment
  FLOTILLA_NOTIFY_SLACK_ADDRESS=https://hooks.slack.com/services/... flotilla notify

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
	f.BoolVar(&o.dryRun, "dry-run", false, "compute the statuses and events and print them; send and record nothing")
	f.StringVar(&o.credentialsDir, "credentials-dir", "", "directory with the providers' secrets: <name>/address and <name>/token, for those not in $FLOTILLA_NOTIFY_<NAME>_ADDRESS and _TOKEN")
	f.BoolVar(&o.exitCode, "exit-code", false, "exit 1 while a commit status is pending (its clusters still apply the change), as diff(1): a CI job follows until it settles")
	f.IntVar(&o.maxEvents, "max-events", 30, "events sent to one provider per run; the rest go with the next run")
	return c
}

func runNotify(ctx context.Context, stdout, stderr io.Writer, o *notifyOptions) error {
	root, repo, err := o.status.load(ctx)
	if err != nil {
		return err
	}
	routes := notify.Routes(repo)
	if o.forge.kind == "" && len(routes) == 0 && !o.dryRun {
		return fmt.Errorf("nothing to notify: no --forge for commit statuses and no Provider with an Alert in %s/", fleet.ProvidersDir)
	}
	head, err := gitrepo.ReadCommit(root, o.commit)
	if err != nil {
		return fmt.Errorf("--commit %s: %w", o.commit, err)
	}
	snap, err := o.snapshot(ctx, root)
	if err != nil {
		return err
	}
	docs := map[string]fleetview.ClusterDocument{}
	for _, cd := range snap.Documents.Clusters {
		docs[cd.Cluster] = cd
	}
	now := o.status.now()
	apps, err := notify.Observe(repo, fleetrender.CommittedAt(root), docs, now)
	if err != nil {
		return err
	}
	statuses := make([]forge.CommitStatus, len(apps))
	for i, a := range apps {
		statuses[i] = notify.Summarize(head.Hash, a, o.dashboardURL)
	}
	facts := notify.Facts(repo, snap.View, apps, head.Hash, o.dashboardURL, now)
	if o.dryRun {
		return writeNotifications(stdout, statuses, facts, o.status.output)
	}
	var client *forge.Client
	if o.forge.kind != "" {
		if client, err = o.forge.client(o.status.timeout); err != nil {
			return err
		}
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
		// GitHub takes an Actions token only with this user name; Gitea and
		// GitLab take any.
		rec.Auth = gitrepo.Auth{Username: "x-access-token", Password: os.Getenv(forgeTokenEnv)}
	}
	var errs []error
	if client != nil {
		pending, err := rec.Pending(ctx)
		if err != nil {
			return err
		}
		followed, err := notify.Follow(ctx, root, head.Hash, pending, statuses)
		if err != nil {
			return err
		}
		if err := sendStatuses(ctx, stderr, client, rec, head.Hash, append(statuses, followed...)); err != nil {
			errs = append(errs, err)
		}
	}
	told, err := notify.Tell(ctx, rec, routes, facts, notify.TellOptions{CredentialsDir: o.credentialsDir, MaxPerProvider: o.maxEvents})
	for _, d := range told {
		fmt.Fprintf(stderr, "told %s: %s %s\n", d.Route.Provider.Metadata.Name, d.Fact.Event.Reason, d.Fact.Event.Message)
	}
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if o.exitCode && slices.ContainsFunc(statuses, func(s forge.CommitStatus) bool { return s.State == forge.StatePending }) {
		return exitError{code: ExitChanges}
	}
	return nil
}

// snapshot reads the fleet view and the clusters' documents in one pass,
// from --status-repo or the repo's own status refs.
func (o *notifyOptions) snapshot(ctx context.Context, root string) (*fleetview.Snapshot, error) {
	ro, err := o.status.readOptions(root)
	if err != nil {
		return nil, err
	}
	ro.Now = o.status.now
	snap, err := fleetview.ReadSnapshot(ctx, ro)
	if err != nil {
		return nil, fmt.Errorf("read cluster status: %w", err)
	}
	return snap, nil
}

func sendStatuses(ctx context.Context, stderr io.Writer, client *forge.Client, rec *notify.Recorder, head string, statuses []forge.CommitStatus) error {
	sent, err := notify.Send(ctx, client, rec, statuses)
	for _, s := range sent {
		fmt.Fprintf(stderr, "set %s %s on %s: %s\n", s.Context, s.State, shortRev(s.Commit), s.Description)
	}
	if err == nil && len(sent) == 0 {
		fmt.Fprintf(stderr, "statuses of %s up to date (%d)\n", shortRev(head), len(statuses))
	}
	return err
}

// notification is what --dry-run prints: the statuses, and the facts
// events would tell when they change.
type notification struct {
	Statuses []forge.CommitStatus `json:"statuses"`
	Facts    []notify.Fact        `json:"facts"`
}

func writeNotifications(w io.Writer, statuses []forge.CommitStatus, facts []notify.Fact, format string) error {
	if ok, err := writeMachine(w, notification{Statuses: statuses, Facts: facts}, format); ok {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTEXT\tSTATE\tDESCRIPTION")
	for _, s := range statuses {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Context, s.State, strings.ReplaceAll(s.Description, "\t", " "))
	}
	fmt.Fprintln(tw, "\nSUBJECT\tVALUE\tEVENT ON CHANGE")
	for _, f := range facts {
		ev := "-"
		if f.Event != nil {
			ev = f.Event.Reason + ": " + f.Event.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Subject, f.Value, ev)
	}
	return tw.Flush()
}
