package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	yaml "gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// ErrNoRecipient: a cluster named (or a member of a fleet named) for
// `secrets recipients` has no spec.sops.ageRecipient, or a name is
// neither a fleet nor a cluster.
var ErrNoRecipient = errors.New("no age recipient")

func newSecretsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "secrets",
		Short: "Help encrypt Secrets for the fleet's clusters (SOPS with age)",
		Example: `  # The age recipients of every member of the production fleet, for .sops.yaml
  flotilla secrets recipients production`,
		Args: cobra.NoArgs,
	}
	c.AddCommand(newSecretsRecipientsCommand())
	return c
}

type recipientsOptions struct {
	repo   string
	output string
}

// clusterRecipient is one row of `secrets recipients`.
type clusterRecipient struct {
	Cluster   string `json:"cluster"`
	Recipient string `json:"recipient"`
}

func newSecretsRecipientsCommand() *cobra.Command {
	o := &recipientsOptions{}
	c := &cobra.Command{
		Use:   "recipients FLEET|CLUSTER...",
		Short: "Print the age recipients of fleets' members and clusters, for .sops.yaml",
		Long: `recipients prints the age public keys (spec.sops.ageRecipient of
clusters/NAME.yaml, set by flotilla bootstrap --sops-age-key) of the named
clusters and of every member of the named fleets, each cluster once, sorted.
A file encrypted for them decrypts on those clusters only: every other
cluster's agent reports the unit DecryptionFailed. A name that is neither a
fleet nor a cluster, or a cluster without a recipient, is an error.

Output (-o):
  text   the recipients, comma-separated on one line: the value of age: in
         .sops.yaml, or of sops --encrypt --age
  table  CLUSTER and RECIPIENT columns
  yaml   a .sops.yaml for these clusters: Kubernetes manifests encrypt only
         data and stringData (the hub must read their kind and name to
         plan), every other file (.env, certificates) entirely
  json   [{"cluster": …, "recipient": …}, …]`,
		Example: `  # Write .sops.yaml for the production fleet, then encrypt a Secret in place
  # (sops reads .sops.yaml from its working directory, hence --config)
  flotilla secrets recipients production -o yaml > apps/payments/.sops.yaml
  sops --config apps/payments/.sops.yaml --encrypt --in-place apps/payments/db-secret.yaml

  # Encrypt for two clusters by name, without a .sops.yaml
  sops --encrypt --encrypted-regex '^(data|stringData)$' \
    --age "$(flotilla secrets recipients member1 edge-7)" secret.yaml > secret.enc.yaml

  # Which clusters of the staging fleet have keys
  flotilla secrets recipients staging -o table --repo ./fleet`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runRecipients(c.Context(), c.OutOrStdout(), o, args)
		},
	}
	c.Flags().StringVar(&o.repo, "repo", ".", "fleet repo directory")
	c.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text, table, yaml or json")
	return c
}

func runRecipients(ctx context.Context, out io.Writer, o *recipientsOptions, names []string) error {
	switch o.output {
	case "text", "table", "yaml", "json":
	default:
		return fmt.Errorf("-o %q: want text, table, yaml or json", o.output)
	}
	root, err := filepath.Abs(o.repo)
	if err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	repo, err := loadRepo(ctx, root)
	if err != nil {
		return err
	}
	rows, err := recipientsOf(repo, names)
	if err != nil {
		return err
	}
	return printRecipients(out, o.output, rows)
}

// recipientsOf resolves fleet and cluster names (a fleet first, as
// destinations do) into one row per cluster, sorted by cluster.
func recipientsOf(repo *fleet.Repo, names []string) ([]clusterRecipient, error) {
	byName := map[string]*fleet.Cluster{}
	var problems []string
	for _, n := range names {
		if f := repo.Fleet(n); f != nil {
			members := repo.Members(f)
			if len(members) == 0 {
				problems = append(problems, fmt.Sprintf("fleet %s has no members", n))
			}
			for _, c := range members {
				byName[c.Metadata.Name] = c
			}
			continue
		}
		if c := repo.Cluster(n); c != nil {
			byName[c.Metadata.Name] = c
			continue
		}
		problems = append(problems, fmt.Sprintf("%s is neither a fleet nor a cluster", n))
	}
	var rows []clusterRecipient
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		c := byName[name]
		if c.Spec.SOPS == nil || c.Spec.SOPS.AgeRecipient == "" {
			problems = append(problems, fmt.Sprintf("cluster %s has no spec.sops.ageRecipient (flotilla bootstrap %s --force --sops-age-key generate)", name, name))
			continue
		}
		rows = append(rows, clusterRecipient{Cluster: name, Recipient: c.Spec.SOPS.AgeRecipient})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoRecipient, strings.Join(problems, "; "))
	}
	return rows, nil
}

func printRecipients(out io.Writer, format string, rows []clusterRecipient) error {
	recipients := make([]string, len(rows))
	for i, r := range rows {
		recipients[i] = r.Recipient
	}
	switch format {
	case "table":
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLUSTER\tRECIPIENT")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\n", r.Cluster, r.Recipient)
		}
		return tw.Flush()
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "yaml":
		clusters := make([]string, len(rows))
		for i, r := range rows {
			clusters[i] = r.Cluster
		}
		type rule struct {
			PathRegex      string `yaml:"path_regex"`
			EncryptedRegex string `yaml:"encrypted_regex,omitempty"`
			Age            string `yaml:"age"`
		}
		doc := struct {
			CreationRules []rule `yaml:"creation_rules"`
		}{[]rule{
			{PathRegex: `\.(yaml|yml|json)$`, EncryptedRegex: "^(data|stringData)$", Age: strings.Join(recipients, ",")},
			{PathRegex: ".*", Age: strings.Join(recipients, ",")},
		}}
		fmt.Fprintf(out, "# Written by flotilla secrets recipients for %s.\n", strings.Join(clusters, ", "))
		fmt.Fprintln(out, "# Manifests keep apiVersion, kind and metadata readable for render and plan;")
		fmt.Fprintln(out, "# other files (.env, certificates) are encrypted whole.")
		enc := yaml.NewEncoder(out)
		enc.SetIndent(2)
		if err := enc.Encode(doc); err != nil {
			return err
		}
		return enc.Close()
	}
	_, err := fmt.Fprintln(out, strings.Join(recipients, ","))
	return err
}
