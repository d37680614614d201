package cmd

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/hub/fleetview"
)

// newStatusJobsCommand is `flotilla status jobs`; it shares the status
// command's flags (o).
func newStatusJobsCommand(o *statusOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "jobs",
		Short: "List the fleet's Volcano jobs as the agents report them",
		Long: `jobs lists every Volcano job each cluster's agent reports in its status
document (refs/heads/flotilla/status/<cluster>): its phase (Pending, Running,
Completed, Failed, …, or NotSubmitted when the gang preflight kept it back),
its PodGroup's phase, running/succeeded/failed pods, the preflight verdict at
submission (Fits, Waiting for free capacity, Unschedulable with the
shortfall), when it started and finished, and why it is not progressing
(e.g. "spec changed; running job left as is").

Clusters whose status is missing or not trusted are named below the table.`,
		Example: `  # Every job of the fleet, from a local clone
  flotilla status jobs --repo ./fleet

  # One cluster's jobs as YAML
  flotilla status jobs --cluster member1 -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ro, err := o.readOptions()
			if err != nil {
				return err
			}
			return watch(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), o, func(ctx context.Context, w io.Writer) error {
				docs, err := fleetview.ReadDocuments(ctx, ro)
				if err != nil {
					return err
				}
				return fleetview.WriteJobs(w, fleetview.NewJobsView(docs, time.Now()), o.output)
			})
		},
	}
}
