package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/hub/plan"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
)

type planOptions struct {
	repo     string
	base     string
	head     string
	output   string
	clusters []string
	fleets   []string
	noColor  bool
	maxBytes int
	mdFile   string
	progress bool
	// statusRepo and authDir: as render's, so both place GlobalJobs alike.
	statusRepo string
	authDir    string
	// registry: as render's, for oci:// charts not vendored yet.
	registry registryFlags
	// commentOn is the pull (merge) request whose sticky plan comment is
	// posted or updated through forge's API.
	commentOn int
	forge     forgeFlags
	// statusOn is the commit (a pull request's head) that gets the plan's
	// commit status, for branch protection to require.
	statusOn string
}

// PlanStatusContext is the commit status plan --status-on sets: branch
// protection can require it.
const PlanStatusContext = "flotilla/plan"

func newPlanCommand() *cobra.Command {
	o := &planOptions{}
	c := &cobra.Command{
		Use:   "plan --base REV",
		Short: "Show what a change does to every cluster",
		Long: `plan renders two revisions of the fleet repo — base and head (by default the
working tree) — through the same pkg/render code the agents apply with, and
prints, per cluster, the units and objects added, removed and changed, with a
unified diff of each changed object. Secret values are masked. Replica
divisions and Volcano job placements that move between clusters are also
said in words.

Both sides are compiled from their inputs, as CI does after ` + "`flotilla render`" + `;
a stale rendered/ at head is reported as a warning. Units whose content hash
is the same on both sides are not rendered. Helm capabilities come from each
cluster's latest status document (refs/heads/flotilla/status/<cluster> or
refs/remotes/origin/flotilla/status/<cluster>), else from its Cluster file.

Formats: text (coloured on a terminal), markdown (a pull-request comment: a
summary table, then a folded section per cluster; at most --max-bytes) and
json (a stable schema, see hub/plan).

With --comment-on N the Markdown rendering is also posted as one comment on
pull (merge) request N through the forge's API (--forge github, gitlab or
gitea), and edited in place by later runs: one sticky comment per request.
With --status-on COMMIT (the pull request's head) plan also sets the commit
status flotilla/plan there: success when every unit renders (saying how
many clusters change), failure when the inputs are invalid or a unit does
not render. Branch protection that requires flotilla/plan then refuses to
merge a change whose plan fails, whichever CI runs it.
The API token is read from $FLOTILLA_FORGE_TOKEN.

Exit codes, as diff(1): 0 no changes, 1 changes, 2 error (invalid input, or a
unit that fails to render at head — the plan is still printed — or a comment
the forge refused).`,
		Example: `  # What does my working tree change, compared with main?
  flotilla plan --base main

  # In CI, on a pull request: a Markdown comment
  flotilla plan --base origin/main --head HEAD -o markdown > plan.md

  # The same, with the whole plan as text in the job log
  flotilla plan --base origin/main --head HEAD --no-color --markdown-file plan.md

  # The sticky comment on pull request 42 of a Gitea repository
  FLOTILLA_FORGE_TOKEN=... flotilla plan --base origin/main --head HEAD \
    --comment-on 42 --forge gitea --forge-url https://gitea.example.com --forge-repo ops/fleet

  # Only the production fleet and one more cluster, as JSON
  flotilla plan --base main --fleet production --cluster edge-1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			charts, err := o.registry.vendor(c.InOrStdin())
			if err != nil {
				return err
			}
			return runPlan(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), o, charts)
		},
	}
	f := c.Flags()
	f.StringVar(&o.repo, "repo", ".", "fleet repo directory (a Git work tree, or a directory inside one)")
	f.StringVar(&o.base, "base", "", "base revision: branch, tag, remote branch (origin/main) or commit (required)")
	f.StringVar(&o.head, "head", "", "head revision (default: the working tree, uncommitted changes included)")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text, markdown or json")
	f.StringArrayVar(&o.clusters, "cluster", nil, "only this cluster (repeatable; with --fleet, the union)")
	f.StringArrayVar(&o.fleets, "fleet", nil, "only the members of this fleet (repeatable)")
	f.BoolVar(&o.noColor, "no-color", false, "no colours in text output, even on a terminal")
	f.IntVar(&o.maxBytes, "max-bytes", plan.DefaultMaxBytes, "largest Markdown output; longer plans are truncated with a note")
	f.StringVar(&o.mdFile, "markdown-file", "", "also write the Markdown rendering to this file (CI: the full plan in the log, the comment from the same run)")
	f.IntVar(&o.commentOn, "comment-on", 0, "also post the Markdown plan as the sticky comment of this pull (merge) request, through --forge's API")
	f.StringVar(&o.statusOn, "status-on", "", "also set the commit status "+PlanStatusContext+" on this commit (the pull request's head), through --forge's API")
	o.forge.bind(f)
	f.BoolVar(&o.progress, "progress", false, "report progress on stderr even when it is not a terminal")
	f.StringVar(&o.statusRepo, "status-repo", "", "where GlobalJob BestFit placement reads the clusters' status (capacity), as for render: a URL or directory (default: --repo's own status refs when it is a Git repository)")
	f.StringVar(&o.authDir, "git-credentials-dir", "", "directory with Git credentials for --status-repo (files username, password, bearerToken, identity, known_hosts, ca.crt)")
	o.registry.add(f)
	_ = c.MarkFlagRequired("base")
	return c
}

func runPlan(ctx context.Context, stdout, stderr io.Writer, o *planOptions, charts fleetrender.ChartVendor) error {
	switch o.output {
	case plan.FormatText, plan.FormatMarkdown, plan.FormatJSON:
	default:
		return fmt.Errorf("--output %q: want text, markdown or json", o.output)
	}
	if o.maxBytes <= 0 {
		return fmt.Errorf("--max-bytes %d: must be positive", o.maxBytes)
	}
	opts := plan.Options{
		RepoDir:  o.repo,
		Base:     o.base,
		Head:     o.head,
		Clusters: o.clusters,
		Fleets:   o.fleets,

		StatusRepo:    o.statusRepo,
		StatusAuthDir: o.authDir,
		Charts:        charts,
	}
	if o.progress || isTerminal(stderr) {
		opts.Progress = func(msg string) { fmt.Fprintln(stderr, msg) }
	}
	var client *forge.Client
	if o.commentOn > 0 || o.statusOn != "" {
		var err error
		if client, err = o.forge.client(30 * time.Second); err != nil {
			return err
		}
	}
	p, err := plan.Compute(ctx, opts)
	if err != nil {
		var list fleet.ErrorList
		if !errors.As(err, &list) {
			return errors.Join(err, o.setStatus(ctx, stderr, client, forge.StateFailure, "the plan failed: "+redact.New().Error(err)))
		}
		problems := make([]string, len(list))
		for i, e := range list {
			problems[i] = e.Error()
			fmt.Fprintln(stderr, problems[i])
		}
		fmt.Fprintf(stderr, "%s found\n", plural.Count(len(list), "problem", "problems"))
		if err := errors.Join(o.publish(ctx, stderr, client, plan.MarkdownProblems(problems, o.maxBytes)),
			o.setStatus(ctx, stderr, client, forge.StateFailure, "the fleet repo does not load: "+plural.Count(len(list), "problem", "problems"))); err != nil {
			return err
		}
		return exitError{code: ExitError}
	}
	color := o.output == plan.FormatText && !o.noColor && isTerminal(stdout)
	if err := plan.Write(stdout, p, o.output, plan.FormatOptions{Color: color, MaxBytes: o.maxBytes}); err != nil {
		return err
	}
	if err := o.publish(ctx, stderr, client, plan.Markdown(p, o.maxBytes)); err != nil {
		return err
	}
	state, desc := forge.StateSuccess, "no cluster changes"
	switch {
	case p.Failed:
		state, desc = forge.StateFailure, "a unit does not render at head: see the plan"
	case !p.Empty():
		desc = plural.Count(len(p.Clusters), "cluster changes", "clusters change")
	}
	if err := o.setStatus(ctx, stderr, client, state, desc); err != nil {
		return err
	}
	switch {
	case p.Failed:
		return exitError{code: ExitError}
	case !p.Empty():
		return exitError{code: ExitChanges}
	}
	return nil
}

// publish writes the Markdown plan to --markdown-file and posts it as the
// sticky comment of --comment-on, as far as they are given.
func (o *planOptions) publish(ctx context.Context, stderr io.Writer, client *forge.Client, md string) error {
	if o.mdFile != "" {
		if err := os.WriteFile(o.mdFile, []byte(md), 0o644); err != nil {
			return fmt.Errorf("--markdown-file: %w", err)
		}
	}
	if o.commentOn > 0 {
		id, err := client.UpsertComment(ctx, o.commentOn, plan.MarkdownMarker, md)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "plan comment %d on #%d\n", id, o.commentOn)
	}
	return nil
}

// setStatus sets the plan's commit status on --status-on, when given.
func (o *planOptions) setStatus(ctx context.Context, stderr io.Writer, client *forge.Client, state forge.State, desc string) error {
	if o.statusOn == "" || client == nil {
		return nil
	}
	if err := client.SetStatus(ctx, forge.CommitStatus{Commit: o.statusOn, Context: PlanStatusContext, State: state, Description: desc}); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s %s on %s: %s\n", PlanStatusContext, state, shortRev(o.statusOn), desc)
	return nil
}

// ExitCode is the process exit code Execute returns for err, the result of
// running the root command (for callers that run it in-process, like
// end-to-end tests).
func ExitCode(err error) int {
	var ee exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	}
	return ExitError
}
