package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

type rolloutOptions struct {
	repo         string
	statusRepo   string
	statusShards int
	authDir      string
	output       string
	timeout      time.Duration
	messageFile  string
	now          func() time.Time
}

func (o *rolloutOptions) bind(c *cobra.Command) {
	f := c.PersistentFlags()
	f.StringVar(&o.repo, "repo", ".", "fleet repo directory (a clone: rollout commands write rendered/)")
	f.StringVar(&o.statusRepo, "status-repo", "", "where the agents commit status: a URL or directory, with {shard} for sharded status repos (default: --repo's own status refs)")
	f.IntVar(&o.statusShards, "status-shards", 1, "number of status repos {shard} ranges over (as given to the agents)")
	f.StringVar(&o.authDir, "git-credentials-dir", "", "directory with Git credentials for --status-repo (files username, password, bearerToken, identity, known_hosts, ca.crt)")
	f.StringVarP(&o.output, "output", "o", fleetview.FormatTable, "output format: table, json or yaml")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "timeout of each Git operation")
}

func newRolloutCommand() *cobra.Command {
	o := &rolloutOptions{now: time.Now}
	c := &cobra.Command{
		Use:   "rollout",
		Short: "Follow and advance the progressive rollouts of applications",
		Long: `An application with a rollout (spec.rollout on it or on its fleet) receives a
change in waves: flotilla render gives the new revision to the first wave only;
the other clusters keep what they had, byte for byte. The rollout's state —
the revision and how many waves have it — is rendered/rollouts/<app>.yaml,
written only by flotilla commands, so advancing a rollout is a commit.

The rollout commands read the clusters' status from their status refs (as
flotilla status does) and change only the fleet repo's working tree: commit
and push what they write (the template's scheduled CI job does).`,
		Args: cobra.NoArgs,
	}
	o.bind(c)
	c.AddCommand(newRolloutStatusCommand(o), newRolloutAdvanceCommand(o), newRolloutDueCommand(o),
		newRolloutStateCommand(o, "pause", "Stop rollout advance from releasing further waves of APP", func(s *rollout.State) { s.Paused = true }),
		newRolloutStateCommand(o, "resume", "Let rollout advance release the waves of APP again", func(s *rollout.State) { s.Paused = false }),
		newRolloutAbortCommand(o))
	return c
}

func newRolloutAbortCommand(o *rolloutOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "abort APP",
		Short: "Give every cluster APP's rollout changed its last unit that was Ready there",
		Long: `abort gives every cluster whose unit APP's rollout changed the newest unit its
agent reports Ready there (from its status ref) among those the rollout keeps:
the unit the cluster had when the rollout started, and those kept from
rollouts this one replaced before they completed. So a fix rolled out over a
change that failed on the canary never puts the failed change back. A
cluster whose status does not say (none, not trusted, an older agent) gets
the unit it had when the rollout started. It prints which unit each cluster
gets and why, rewrites rendered/rollouts/<APP>.yaml and the clusters'
slices; commit and push them. Nothing advances an aborted rollout; the next
revision starts over at wave 1.`,
		Example: "  flotilla rollout abort web",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runAbort(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), o, args[0])
		},
	}
}

func runAbort(ctx context.Context, stdout, stderr io.Writer, o *rolloutOptions, app string) error {
	root, repo, err := o.load(ctx)
	if err != nil {
		return err
	}
	committed := fleetrender.CommittedAt(root)
	st, err := committed.State(app)
	if err != nil {
		return err
	}
	if st == nil || repo.Application(app) == nil || repo.Waves(repo.Application(app)) == nil {
		return fmt.Errorf("application %s has no rollout in %s (render it first)", app, rollout.Dir)
	}
	docs := map[string]*status.ClusterStatus{}
	if all, err := o.documents(ctx, root, repo); err != nil {
		// An abort is an emergency: it goes on without status.
		fmt.Fprintf(stderr, "warning: %v: every cluster gets the unit it had when the rollout started\n", err)
	} else {
		for c, cd := range all {
			if cd.Document != nil && (cd.Trust == nil || cd.Trust.Trusted) {
				docs[c] = cd.Document
			}
		}
	}
	current := map[string]string{}
	for c := range st.Previous {
		if s, err := committed.Slice(c); err == nil {
			for _, u := range s.Units {
				if u.Name == app {
					current[c] = u.Hash
				}
			}
		}
	}
	choices := rollout.ChooseAbort(st, app, current, docs)
	cp := *st
	cp.Aborted = true
	cp.Restore = rollout.Restore(st, choices)
	lines := make([]string, len(choices))
	for i, ch := range choices {
		lines[i] = ch.String()
	}
	cp.Reason = "flotilla rollout abort"
	if len(lines) > 0 {
		cp.Reason += ": " + strings.Join(lines, "; ")
	}
	if err := writeStates(ctx, root, repo, map[string]*rollout.State{app: &cp}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rollout of %s: abort\n", app)
	for _, l := range lines {
		fmt.Fprintln(stdout, "  "+l)
	}
	return nil
}

func newRolloutStatusCommand(o *rolloutOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status [APP]",
		Short: "Show each rollout's waves, every released cluster's state and what blocks the next wave",
		Long: `status prints, per application under a rollout (or only APP), its revision, its
waves and, for every cluster of a released wave, what its agent reports about
the released unit:

  Pending  the agent has not reported the released unit yet (or its status
           cannot be trusted)
  Applied  reported, not Ready at the released content yet (or its agent
           does not say since when: an older agent)
  Ready    Ready, with the time it became Ready at the released content
           (readySince in its status), which bake counts from
  Failed   the unit failed, with the reason
  Held     the cluster's wave is not released; it keeps its previous content

and what holds the next wave back (or that rollout advance would release it).`,
		Example: `  flotilla rollout status
  flotilla rollout status web -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			progress, _, err := readProgress(c.Context(), o, args)
			if err != nil {
				return err
			}
			return writeProgress(c.OutOrStdout(), progress, o.output)
		},
	}
}

func newRolloutAdvanceCommand(o *rolloutOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "advance",
		Short: "Release the next wave of every rollout whose last released wave is Ready for its bake time",
		Long: `advance reads the status refs and, for every application under a rollout,
releases the next wave when every cluster of the last released wave reports
the released unit Ready for at least bake — counted from when it became Ready
at the released content, not from an earlier Ready — with no more Failed
clusters than the wave's maxFailures (waves with no cluster are passed over).
It writes rendered/ and prints a commit message saying what it released and
why, with each cluster's measured time;
--message-file writes that message to a file too (for git commit -F).

Idempotent: run it again and it releases nothing more until the newly
released wave is Ready for its bake time.

Exit codes: 0 a wave was released, 1 nothing to do (each rollout's reason is
printed), 2 error.`,
		Example: `  # In a scheduled CI job
  flotilla rollout advance --message-file /tmp/msg && git commit -aF /tmp/msg && git push`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runAdvance(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), o)
		},
	}
	c.Flags().StringVar(&o.messageFile, "message-file", "", "also write the commit message to this file")
	return c
}

func newRolloutDueCommand(o *rolloutOptions) *cobra.Command {
	var within time.Duration
	c := &cobra.Command{
		Use:   "due",
		Short: "Say whether rollout advance may release a wave within a time (exit 0) or not (exit 1)",
		Long: `due tells a CI job that follows the status refs whether to keep following
them. It reads the status refs as advance does and exits 0 when a rollout may
release its next wave within --within: now, as soon as a cluster of the last
released wave reports Ready at the revision (nobody knows when), or when its
bake ends if that is within --within. It exits 1 when none may: every rollout
is complete, paused, aborted or held by Failed clusters (each waits for a
person), or bakes past --within (a later scheduled run releases it). Each
rollout's state is printed (-o json or yaml: application, state, due,
reason, bakedAt).

Exit codes: 0 due, 1 not due, 2 error.`,
		Example: `  # In the template's rollout job, between two advances
  flotilla rollout due --within 1200s || exit 0`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			progress, _, err := readProgress(c.Context(), o, nil)
			if err != nil {
				return err
			}
			now := o.now()
			views := []dueView{}
			var due bool
			for _, p := range progress {
				v := dueView{Application: p.Application, State: p.State, Due: p.DueWithin(now, within), Reason: p.Blocked}
				if p.State == rollout.ProgressReleasable {
					v.Reason = "rollout advance releases wave " + p.Waves[p.Released].Name
				}
				if p.State == rollout.ProgressBaking {
					at := p.BakedAt().UTC()
					v.BakedAt = &at
				}
				due = due || v.Due
				views = append(views, v)
			}
			if err := writeDue(c.OutOrStdout(), views, within, due, o.output); err != nil {
				return err
			}
			if !due {
				return exitError{code: ExitChanges}
			}
			return nil
		},
	}
	c.Flags().DurationVar(&within, "within", 0, "how far ahead a bake may end and still count as due")
	return c
}

// dueView is one rollout as rollout due judges it.
type dueView struct {
	Application string                `json:"application"`
	State       rollout.ProgressState `json:"state"`
	Due         bool                  `json:"due"`
	Reason      string                `json:"reason,omitempty"`
	// BakedAt: when a Baking wave's bake ends.
	BakedAt *time.Time `json:"bakedAt,omitempty"`
}

func writeDue(w io.Writer, views []dueView, within time.Duration, due bool, format string) error {
	if done, err := writeMachine(w, views, format); done {
		return err
	}
	head := "nothing due within " + within.String()
	if due {
		head = "due within " + within.String()
	}
	fmt.Fprintln(w, head)
	for _, v := range views {
		mark := "not due"
		if v.Due {
			mark = "due"
		}
		reason := v.Reason
		if v.BakedAt != nil {
			reason += "; baked at " + v.BakedAt.Format(time.RFC3339)
		}
		if _, err := fmt.Fprintf(w, "  %s: %s, %s: %s\n", v.Application, mark, v.State, reason); err != nil {
			return err
		}
	}
	return nil
}

// newRolloutStateCommand changes APP's rollout state with change and
// renders.
func newRolloutStateCommand(o *rolloutOptions, verb, short string, change func(*rollout.State)) *cobra.Command {
	return &cobra.Command{
		Use:     verb + " APP",
		Short:   short,
		Long:    short + ". It rewrites rendered/rollouts/<APP>.yaml; commit and push it.",
		Example: "  flotilla rollout " + verb + " web",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			root, repo, err := o.load(c.Context())
			if err != nil {
				return err
			}
			st, err := fleetrender.CommittedAt(root).State(args[0])
			if err != nil {
				return err
			}
			if st == nil || repo.Application(args[0]) == nil || repo.Waves(repo.Application(args[0])) == nil {
				return fmt.Errorf("application %s has no rollout in %s (render it first)", args[0], rollout.Dir)
			}
			cp := *st
			change(&cp)
			cp.Reason = "flotilla rollout " + verb
			if err := writeStates(c.Context(), root, repo, map[string]*rollout.State{args[0]: &cp}); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "rollout of %s: %s\n", args[0], verb)
			return err
		},
	}
}

func (o *rolloutOptions) load(ctx context.Context) (string, *fleet.Repo, error) {
	if o.output != fleetview.FormatTable && o.output != fleetview.FormatJSON && o.output != fleetview.FormatYAML {
		return "", nil, fmt.Errorf("--output %q: want table, json or yaml", o.output)
	}
	root, err := filepath.Abs(o.repo)
	if err != nil {
		return "", nil, fmt.Errorf("repo: %w", err)
	}
	repo, err := loadRepo(ctx, root)
	if err != nil {
		return "", nil, err
	}
	return root, repo, nil
}

// readProgress evaluates every rollout (or only args[0]) against the status
// refs.
func readProgress(ctx context.Context, o *rolloutOptions, args []string) ([]*rollout.Progress, string, error) {
	root, repo, err := o.load(ctx)
	if err != nil {
		return nil, "", err
	}
	committed := fleetrender.CommittedAt(root)
	var apps []*fleet.Application
	for _, a := range repo.Applications {
		if (len(args) == 0 || a.Metadata.Name == args[0]) && repo.RolloutOf(a) != nil {
			apps = append(apps, a)
		}
	}
	if len(args) > 0 && len(apps) == 0 {
		return nil, "", fmt.Errorf("application %s has no rollout", args[0])
	}
	docs, err := o.documents(ctx, root, repo)
	if err != nil {
		return nil, "", err
	}
	slices := map[string]*slice.Slice{}
	var out []*rollout.Progress
	for _, a := range apps {
		st, err := committed.State(a.Metadata.Name)
		if err != nil {
			return nil, "", err
		}
		if st == nil {
			continue // never rendered under its rollout
		}
		observe := func(cluster string) rollout.ClusterProgress {
			s, ok := slices[cluster]
			if !ok {
				s, _ = committed.Slice(cluster)
				slices[cluster] = s
			}
			want := ""
			if s != nil {
				for _, u := range s.Units {
					if u.Name == a.Metadata.Name {
						want = u.Hash
					}
				}
			}
			return fleetview.ObserveUnit(docs, cluster, a.Metadata.Name, want)
		}
		out = append(out, rollout.Evaluate(st, repo.Waves(a), repo.RolloutOf(a).BakeDuration(), observe, o.now()))
	}
	return out, root, nil
}

// readOptions say where the clusters' status is read: --status-repo (with
// {shard} over --status-shards repos), else the status refs of the fleet
// repo at root; with --git-credentials-dir's credentials.
func (o *rolloutOptions) readOptions(root string) (fleetview.ReadOptions, error) {
	ro := fleetview.ReadOptions{Repo: root, Timeout: o.timeout}
	if o.statusRepo != "" {
		if o.statusShards > 1 && !strings.Contains(o.statusRepo, status.ShardPlaceholder) {
			return ro, fmt.Errorf("--status-repo has no %s placeholder for %d shards", status.ShardPlaceholder, o.statusShards)
		}
		ro.StatusRepos = status.ShardURLs(o.statusRepo, o.statusShards)
	}
	if o.authDir != "" {
		auth, err := gitrepo.LoadAuth(o.authDir)
		if err != nil {
			return ro, err
		}
		ro.Auth = auth
	}
	return ro, nil
}

// documents reads the clusters' status from --status-repo, or from the
// repo's own status refs.
func (o *rolloutOptions) documents(ctx context.Context, root string, repo *fleet.Repo) (map[string]fleetview.ClusterDocument, error) {
	out := map[string]fleetview.ClusterDocument{}
	if o.statusRepo == "" && fleetrender.DefaultStatusRepo(root) == "" {
		return out, nil
	}
	ro, err := o.readOptions(root)
	if err != nil {
		return nil, err
	}
	docs, err := fleetview.DocumentsFor(ctx, ro, repo)
	if err != nil {
		return nil, fmt.Errorf("read cluster status: %w", err)
	}
	for _, cd := range docs.Clusters {
		out[cd.Cluster] = cd
	}
	return out, nil
}

func runAdvance(ctx context.Context, stdout, stderr io.Writer, o *rolloutOptions) error {
	progress, root, err := readProgress(ctx, o, nil)
	if err != nil {
		return err
	}
	repo, err := loadRepo(ctx, root)
	if err != nil {
		return err
	}
	states := map[string]*rollout.State{}
	var released, held []string
	for _, p := range progress {
		if p.Release <= p.Released {
			held = append(held, fmt.Sprintf("%s: %s", p.Application, p.Blocked))
			continue
		}
		st, err := fleetrender.CommittedAt(root).State(p.Application)
		if err != nil {
			return err
		}
		cp := *st
		cp.Released = p.Release
		var names []string
		for _, w := range p.Waves[p.Released:p.Release] {
			names = append(names, w.Name)
		}
		why := "first wave"
		if p.Released > 0 {
			why = p.Passed
		}
		cp.Reason = fmt.Sprintf("rollout advance: wave %s released: %s", strings.Join(names, ", "), why)
		states[p.Application] = &cp
		released = append(released, fmt.Sprintf("%s: %s", p.Application, cp.Reason))
	}
	if len(released) == 0 {
		fmt.Fprintln(stdout, "nothing to release")
		for _, h := range held {
			fmt.Fprintln(stdout, "  "+h)
		}
		return exitError{code: ExitChanges}
	}
	if err := writeStates(ctx, root, repo, states); err != nil {
		return err
	}
	sort.Strings(released)
	msg := "flotilla rollout advance\n\n" + strings.Join(released, "\n") + "\n"
	if len(held) > 0 {
		msg += "\nNot released:\n" + strings.Join(held, "\n") + "\n"
	}
	if o.messageFile != "" {
		if err := os.WriteFile(o.messageFile, []byte(msg), 0o644); err != nil {
			return fmt.Errorf("message file: %w", err)
		}
	}
	_, err = io.WriteString(stdout, msg)
	return err
}

// writeStates renders the repo with states replacing the committed rollout
// states and writes rendered/.
func writeStates(ctx context.Context, root string, repo *fleet.Repo, states map[string]*rollout.State) error {
	out, err := fleetrender.Pipeline(ctx, repo, fleetrender.PipelineOptions{
		StatusRepo: fleetrender.DefaultStatusRepo(root),
		Rollout:    &fleetrender.RolloutOptions{States: states},
	})
	if err != nil {
		return err
	}
	_, err = fleetrender.Write(ctx, root, out, fleetrender.WriteOptions{})
	return err
}

// writeMachine writes v as JSON or YAML when format is one of them, and
// says whether it did.
func writeMachine(w io.Writer, v any, format string) (bool, error) {
	switch format {
	case fleetview.FormatJSON:
		return true, writeJSON(w, v)
	case fleetview.FormatYAML:
		data, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(data)
		return true, err
	}
	return false, nil
}

func writeProgress(w io.Writer, ps []*rollout.Progress, format string) error {
	if ps == nil {
		ps = []*rollout.Progress{}
	}
	if done, err := writeMachine(w, ps, format); done {
		return err
	}
	if len(ps) == 0 {
		_, err := fmt.Fprintln(w, "no application is under a rollout")
		return err
	}
	for i, p := range ps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		paused := ""
		if p.Paused {
			paused = ", paused"
		}
		fmt.Fprintf(w, "%s  revision %s  %d of %d waves released (bake %s%s)\n", p.Application, shortRev(p.Revision), p.Released, len(p.Waves), p.Bake.Duration, paused)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WAVE\tCLUSTER\tSTATE\tSINCE\tREASON")
		for _, wv := range p.Waves {
			for _, c := range wv.Clusters {
				since := ""
				if c.Since != nil {
					since = c.Since.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", wv.Name, c.Cluster, c.Phase, since, c.Reason)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if p.Release > p.Released {
			fmt.Fprintf(w, "next: rollout advance releases wave %s\n", p.Waves[p.Released].Name)
		} else {
			fmt.Fprintf(w, "next: %s\n", p.Blocked)
		}
	}
	return nil
}

func shortRev(rev string) string {
	rev = strings.TrimPrefix(rev, "sha256:")
	return rev[:min(12, len(rev))]
}
