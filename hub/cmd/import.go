package cmd

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/hub/kuratorimport"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

func newImportCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "import",
		Short: "Convert another tool's objects into fleet repo files",
	}
	c.AddCommand(newImportKuratorCommand())
	return c
}

type importKuratorOptions struct {
	into   string
	force  bool
	output string
}

// importSummary is the -o json document of import kurator.
type importSummary struct {
	Into     string         `json:"into"`
	Files    []string       `json:"files"`
	Warnings []errorSummary `json:"warnings,omitempty"`
	Errors   []errorSummary `json:"errors,omitempty"`
}

func newImportKuratorCommand() *cobra.Command {
	o := &importKuratorOptions{}
	c := &cobra.Command{
		Use:   "kurator FILE|DIR... --into FLEET_REPO",
		Short: "Convert Kurator Fleets, clusters and Applications into fleet repo files",
		Long: `import kurator reads Kurator objects — fleet.kurator.dev Fleet,
cluster.kurator.dev AttachedCluster and Cluster, apps.kurator.dev Application
with gitRepository or helmRepository sources — from YAML files (a directory
contributes its *.yaml and *.yml files) and writes clusters/, fleets/ and
apps/ files into the fleet repo. Names are kept; a name used in more than
one namespace becomes <namespace>-<name>. Sync policies that differ only in
destination, target namespace, values, patches or images become one
Application; others become <app>-<policy name or position>. A
clusterSelector becomes the list of the fleet's members whose labels match.

Every field Flotilla has no equivalent for (intervals, suspend, Helm
remediation, valuesFrom, Flagger rollout, fleet plugins, cluster
provisioning, kubeconfig Secrets) is reported as a warning naming its file,
line and field. A gitRepository source becomes spec.source.git (url, ref and
path), which the next flotilla render vendors into sources/<app>/ and pins;
a ref Flotilla cannot pin (a semver range, a short commit) leaves the
Application out with a warning. See docs/import-kurator.md.

Nothing is written when any input is invalid or any file would be
overwritten (unless --force). Run flotilla validate afterwards.

Exit codes: 0 imported (warnings are printed on stderr), 2 trouble.`,
		Example: `  # Import Kurator manifests into the fleet repo in ./fleet
  flotilla import kurator kurator/fleet.yaml kurator/apps/ --into ./fleet

  # Overwrite files of an earlier import, print a JSON report
  flotilla import kurator kurator/ --into ./fleet --force -o json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runImportKurator(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), args, o)
		},
	}
	c.Flags().StringVar(&o.into, "into", "", "fleet repo directory to write into (required)")
	c.Flags().BoolVar(&o.force, "force", false, "overwrite files that exist")
	c.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	_ = c.MarkFlagRequired("into")
	return c
}

func runImportKurator(_ context.Context, stdout, stderr io.Writer, args []string, o *importKuratorOptions) error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	sum := &importSummary{Into: o.into, Files: []string{}}
	files, order, err := kuratorimport.ReadInputs(args)
	if err != nil {
		return err
	}
	res, err := kuratorimport.Convert(files, order)
	if err != nil {
		return reportInputErrors(stdout, stderr, o.output, sum, err)
	}
	sum.Warnings = summarizeErrors(res.Warnings)
	printWarnings(stderr, res.Warnings)
	if err := kuratorimport.Write(o.into, res, o.force); err != nil {
		return err
	}
	sum.Files = res.Paths()
	if o.output == "json" {
		return writeJSON(stdout, sum)
	}
	for _, p := range sum.Files {
		fmt.Fprintf(stdout, "wrote %s\n", p)
	}
	_, err = fmt.Fprintf(stdout, "imported into %s: %s, %s; run flotilla validate --repo %s\n",
		o.into, plural.Count(len(sum.Files), "file", "files"), plural.Count(len(res.Warnings), "warning", "warnings"), o.into)
	return err
}
