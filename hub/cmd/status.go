package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

type statusOptions struct {
	repo         string
	branch       string
	statusRepo   string
	statusShards int
	authDir      string
	cacheDir     string
	output       string
	watch        bool
	interval     time.Duration
	timeout      time.Duration
	clusters     []string
	skew         time.Duration
}

func (o *statusOptions) bind(c *cobra.Command) {
	o.bindSource(c.PersistentFlags())
	f := c.PersistentFlags()
	// Not source flags: the dashboard refreshes with --refresh.
	f.BoolVarP(&o.watch, "watch", "w", false, "print again every --interval until interrupted")
	f.DurationVar(&o.interval, "interval", 10*time.Second, "refresh interval of --watch")
	f.StringVarP(&o.output, "output", "o", fleetview.FormatTable, "output format: "+strings.Join(statusFormats, ", ")+" (html: flotilla status only, the page flotilla dashboard serves, as one file)")
}

// bindSource binds the flags that say where the fleet is read from,
// shared by status and dashboard.
func (o *statusOptions) bindSource(f *pflag.FlagSet) {
	f.StringVar(&o.repo, "repo", ".", "fleet repo: a URL, or a local clone or bare repository")
	f.StringVar(&o.branch, "branch", "main", "the fleet repo's branch")
	f.StringVar(&o.statusRepo, "status-repo", "", "where the agents commit status, when not in the fleet repo: a URL or directory, with {shard} for sharded status repos")
	f.IntVar(&o.statusShards, "status-shards", 1, "number of status repos {shard} ranges over (as given to the agents)")
	f.StringVar(&o.authDir, "git-credentials-dir", "", "directory with Git credentials (files username, password, bearerToken, identity, known_hosts, ca.crt)")
	f.StringVar(&o.cacheDir, "cache-dir", "", "where fetched Git objects are kept between runs (default: the user cache directory)")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "timeout of each Git operation")
	f.StringArrayVar(&o.clusters, "cluster", nil, "show only this cluster (repeatable)")
	f.DurationVar(&o.skew, "clock-skew-tolerance", fleetview.DefaultClockSkewTolerance, "how far ahead of this machine's clock a heartbeat (or status commit) may be before its cluster shows ClockSkew")
}

// statusFormats are the formats of flotilla status: fleetview's and the
// page (formatHTML).
var statusFormats = append(slices.Clone(fleetview.Formats), formatHTML)

const formatHTML = "html"

func (o *statusOptions) readOptions() (fleetview.ReadOptions, error) {
	if !slices.Contains(fleetview.Formats, o.output) {
		if o.output == formatHTML {
			return fleetview.ReadOptions{}, fmt.Errorf("--output html is the whole fleet's page: flotilla status -o html")
		}
		return fleetview.ReadOptions{}, fmt.Errorf("--output %q: want one of %s", o.output, strings.Join(fleetview.Formats, ", "))
	}
	if o.watch && o.interval <= 0 {
		return fleetview.ReadOptions{}, fmt.Errorf("--interval must be positive")
	}
	return o.sourceOptions()
}

// sourceOptions checks the source flags and turns them into ReadOptions.
func (o *statusOptions) sourceOptions() (fleetview.ReadOptions, error) {
	if o.skew <= 0 {
		return fleetview.ReadOptions{}, fmt.Errorf("--clock-skew-tolerance must be positive")
	}
	ro := fleetview.ReadOptions{Repo: o.repo, Branch: o.branch, CacheDir: o.cacheDir, Timeout: o.timeout, Clusters: o.clusters,
		ClockSkewTolerance: o.skew}
	if o.statusRepo != "" {
		if o.statusShards < 1 {
			return fleetview.ReadOptions{}, fmt.Errorf("--status-shards must be at least 1")
		}
		if o.statusShards > 1 && !strings.Contains(o.statusRepo, status.ShardPlaceholder) {
			return fleetview.ReadOptions{}, fmt.Errorf("--status-repo has no %s placeholder for %d shards", status.ShardPlaceholder, o.statusShards)
		}
		ro.StatusRepos = status.ShardURLs(o.statusRepo, o.statusShards)
	}
	if o.authDir != "" {
		auth, err := gitrepo.LoadAuth(o.authDir)
		if err != nil {
			return fleetview.ReadOptions{}, err
		}
		ro.Auth = auth
	}
	return ro, nil
}

func newStatusCommand() *cobra.Command {
	o := &statusOptions{}
	var exitCode bool
	var commitURL string
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the fleet as the agents report it through Git",
		Long: `status reads clusters/ and fleets/ from the fleet repo's branch head and the
status every agent commits to its own ref (refs/heads/flotilla/status/<cluster>,
in the fleet repo or in --status-repo), and prints one row per cluster:

  InSync       applied at the head — or at an older commit after which nothing
               in the cluster's slice changed — with every unit Ready
  Behind       not yet applied at the head, or units not Ready yet
  PruneHeld    units left the cluster's slice, but too many to prune without
               the decommission marker: the agent keeps them and waits for
               flotilla cluster decommission (or for the units to come back)
  Failing      a unit (or the agent's loop) failed; the reasons are listed
  Unreachable  no heartbeat for longer than the strictest healthCheck of the
               cluster's fleets (interval × failureThreshold; 10m × 3 when no
               fleet sets one)
  ClockSkew    the heartbeat (or status commit) is more than
               --clock-skew-tolerance (2m) ahead of this machine's clock, shown
               with the offset; its age cannot be judged
  Conflict     the head status came from another cluster instance (the UID of
               kube-system) than the commit before, which was still alive: two
               agents share the cluster name. A re-installed cluster takes its
               ref over once the old instance's heartbeat is older than 3
               heartbeat intervals, or at once with the agent's
               --status-take-over
  NoStatus     the agent never reported
  Untrusted    the status ref's head commit changes more than status.yaml,
               names another cluster, or is not signed by one of the cluster's
               spec.statusKeys; its content is not believed

--repo is a URL (fetched into --cache-dir; only changed refs are fetched again)
or a local directory (a clone or a bare repository, read in place; in a clone
made by git, status refs are found under refs/remotes/origin/ when not local).
Everything comes from Git: no cluster is contacted.

Exit codes: 0 shown, 2 error; with --exit-code, 1 when a cluster is Failing,
Unreachable or Untrusted (the view is printed all the same).`,
		Example: `  # The fleet, from a local clone
  flotilla status --repo ./fleet

  # From the forge, refreshed every 30s
  flotilla status --repo https://git.example.com/fleet.git --git-credentials-dir ~/.flotilla/git --watch --interval 30s

  # Status sharded over 4 repos
  flotilla status --repo ./fleet --status-repo https://git.example.com/fleet-status-{shard}.git --status-shards 4

  # One cluster, as JSON; or a Markdown table for a PR comment
  flotilla status --cluster edge-1 -o json
  flotilla status -o markdown

  # One page of the whole fleet (as flotilla dashboard serves it), for CI to publish
  flotilla status --repo ./fleet -o html > fleet.html

  # In CI: fail (exit 1) when a cluster is Failing, Unreachable or Untrusted
  flotilla status --repo https://git.example.com/fleet.git --exit-code`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.output == formatHTML {
				return writeStatusHTML(c, o, commitURL, exitCode)
			}
			ro, err := o.readOptions()
			if err != nil {
				return err
			}
			var unhealthy []fleetview.ClusterView
			err = watch(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), o, func(ctx context.Context, w io.Writer) error {
				v, err := fleetview.Read(ctx, ro)
				if err != nil {
					return err
				}
				unhealthy = v.Unhealthy()
				return fleetview.WriteFleet(w, v, o.output)
			})
			if err != nil || !exitCode {
				return err
			}
			return reportUnhealthy(c.ErrOrStderr(), unhealthy)
		},
	}
	o.bind(c)
	c.Flags().BoolVar(&exitCode, "exit-code", false, "exit 1 when a cluster is Failing, Unreachable or Untrusted, listing them on stderr (2 stays for errors): for CI jobs that gate or notify")
	c.MarkFlagsMutuallyExclusive("exit-code", "watch")
	bindCommitURL(c, &commitURL)
	c.AddCommand(newStatusRolloutCommand(o))
	c.AddCommand(newStatusJobsCommand(o))
	return c
}

func newStatusRolloutCommand(o *statusOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "rollout [REVISION]",
		Short: "Follow a merged change across the fleet",
		Long: `rollout shows how far a merged change (a commit on the branch; its head when
REVISION is not given) got on every cluster, derived from Git alone, so it
can be run again at any time with the same answer for the same Git state:

  Accepted     the commit is on the branch (the change as a whole)
  Dispatched   the commit changed this cluster's slice (rendered/…/<cluster>/)
  Propagating  the cluster's agent has fetched it (or a later commit)
  Completed    applied at it or later, every unit Ready
  Failed       a unit failed at it or later
  Unaffected   the commit did not change this cluster's slice

REVISION is any revision of a local repository, or a full commit hash for a
URL. With a local clone whose applications are under a progressive rollout,
the output also shows their waves, as flotilla rollout status does (in JSON
and YAML as "waves", the same objects as flotilla rollout status -o json).`,
		Example: `  # The latest merge
  flotilla status rollout --repo ./fleet

  # A given change, until it is done
  flotilla status rollout 3f2a9c1 --repo ./fleet --watch`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ro, err := o.readOptions()
			if err != nil {
				return err
			}
			rev := ""
			if len(args) == 1 {
				rev = args[0]
			}
			return watch(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), o, func(ctx context.Context, w io.Writer) error {
				r, err := fleetview.ReadRollout(ctx, ro, rev)
				if err != nil {
					return err
				}
				if o.output == fleetview.FormatJSON || o.output == fleetview.FormatYAML {
					// One document: the waves go inside it.
					if r.Waves, err = wavesOf(ctx, o); err != nil {
						return err
					}
				}
				if err := fleetview.WriteRollout(w, r, o.output); err != nil {
					return err
				}
				return writeWaves(ctx, w, o)
			})
		},
	}
}

// reportUnhealthy lists the unhealthy clusters on stderr (so that -o json
// on stdout stays one document) and makes the exit code 1; nil when there
// are none.
func reportUnhealthy(stderr io.Writer, unhealthy []fleetview.ClusterView) error {
	if len(unhealthy) == 0 {
		return nil
	}
	for _, cl := range unhealthy {
		fmt.Fprintf(stderr, "unhealthy: %s %s\n", cl.Name, cl.State)
	}
	return exitError{code: ExitUnhealthy}
}

// watch runs show once, or with --watch every interval until ctx ends; a
// failed read is reported and retried then, not fatal.
func watch(ctx context.Context, stdout, stderr io.Writer, o *statusOptions, show func(context.Context, io.Writer) error) error {
	if !o.watch {
		return show(ctx, stdout)
	}
	for {
		if o.output == fleetview.FormatTable || o.output == fleetview.FormatMarkdown {
			fmt.Fprintf(stdout, "\n--- %s\n", time.Now().Format(time.RFC3339))
		}
		if err := show(ctx, stdout); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintln(stderr, "error:", err)
		}
		t := time.NewTimer(o.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// writeWaves appends the waves of progressive rollouts to a table or
// Markdown view when --repo is a local clone that has any (the wave state
// lives in its working tree, rendered/rollouts/); JSON and YAML carry them
// inside their one document (RolloutView.Waves).
func writeWaves(ctx context.Context, w io.Writer, o *statusOptions) error {
	if o.output != fleetview.FormatTable && o.output != fleetview.FormatMarkdown {
		return nil
	}
	progress, err := wavesOf(ctx, o)
	if err != nil || len(progress) == 0 {
		return err
	}
	fmt.Fprintln(w, "\nWaves (flotilla rollout status):")
	return writeProgress(w, progress, fleetview.FormatTable)
}

// wavesOf returns the progressive rollouts of --repo when it is a local
// clone that has any (their state lives in its working tree,
// rendered/rollouts/); nil otherwise.
func wavesOf(ctx context.Context, o *statusOptions) ([]*rollout.Progress, error) {
	if entries, err := os.ReadDir(filepath.Join(o.repo, "rendered", "rollouts")); err != nil || len(entries) == 0 {
		return nil, nil
	}
	ro := &rolloutOptions{repo: o.repo, statusRepo: o.statusRepo, statusShards: o.statusShards, authDir: o.authDir,
		output: fleetview.FormatTable, timeout: o.timeout, now: time.Now}
	progress, _, err := readProgress(ctx, ro, nil)
	if err != nil {
		return nil, fmt.Errorf("waves: %w", err)
	}
	return progress, nil
}
