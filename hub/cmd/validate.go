package cmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

type validateOptions struct {
	repo   string
	output string
}

// validateSummary is the -o json document of validate.
type validateSummary struct {
	Repo         string         `json:"repo"`
	Valid        bool           `json:"valid"`
	Clusters     int            `json:"clusters"`
	Fleets       int            `json:"fleets"`
	Applications int            `json:"applications"`
	Warnings     []errorSummary `json:"warnings,omitempty"`
	// Notes are what the compiler decided on the user's behalf.
	Notes  []string       `json:"notes,omitempty"`
	Errors []errorSummary `json:"errors,omitempty"`
}

func newValidateCommand() *cobra.Command {
	o := &validateOptions{}
	c := &cobra.Command{
		Use:   "validate",
		Short: "Check the fleet repo's inputs without rendering",
		Long: `validate loads clusters/, fleets/ and apps/ strictly and checks everything
render would reject — unknown fields, duplicate names, dangling references,
dependency cycles, invalid names, cluster variables a cluster lacks, a
dependency not deployed to the same cluster, conflicting namespaces or
replica divisions — without vendoring charts or writing anything. Every
problem names its file, line and field.

Exit codes: 0 valid (warnings are printed on stderr), 2 invalid.`,
		Example: `  # Validate the fleet repo in the current directory
  flotilla validate

  # Validate another checkout and print a JSON report
  flotilla validate --repo ./fleet -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runValidate(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), o)
		},
	}
	c.Flags().StringVar(&o.repo, "repo", ".", "fleet repo directory")
	c.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	return c
}

func runValidate(ctx context.Context, stdout, stderr io.Writer, o *validateOptions) error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	root, err := filepath.Abs(o.repo)
	if err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	sum := &validateSummary{Repo: o.repo}
	repo, err := loadRepo(ctx, root)
	if repo != nil {
		sum.Warnings = summarizeErrors(repo.Warnings)
		printWarnings(stderr, repo.Warnings)
		sum.Clusters, sum.Fleets, sum.Applications = len(repo.Clusters), len(repo.Fleets), len(repo.Applications)
	}
	if err != nil {
		return reportInputErrors(stdout, stderr, o.output, sum, err)
	}
	out, err := fleetrender.Pipeline(ctx, repo, fleetrender.PipelineOptions{ValidateOnly: true})
	if err != nil {
		return reportInputErrors(stdout, stderr, o.output, sum, err)
	}
	sum.Warnings = append(sum.Warnings, summarizeErrors(out.Warnings)...)
	printWarnings(stderr, out.Warnings)
	printNotes(stderr, out.Notes)
	sum.Notes = out.Notes
	sum.Valid = true
	if o.output == "json" {
		return writeJSON(stdout, sum)
	}
	_, err = fmt.Fprintf(stdout, "fleet repo is valid: %s, %s, %s\n",
		plural.Count(sum.Clusters, "cluster", "clusters"), plural.Count(sum.Fleets, "fleet", "fleets"), plural.Count(sum.Applications, "application", "applications"))
	return err
}
