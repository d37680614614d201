package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	yaml "gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrNotCluster: a clusters/<name>.yaml that is not one Cluster document
// with a mapping at its top.
var ErrNotCluster = errors.New("not a Cluster document")

func newClusterCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Change a cluster's file in the fleet repo",
		Example: `  # Remove every workload from edge-7, deliberately
  flotilla cluster decommission edge-7`,
		Args: cobra.NoArgs,
	}
	c.AddCommand(newClusterDecommissionCommand())
	return c
}

func newClusterDecommissionCommand() *cobra.Command {
	repo := "."
	c := &cobra.Command{
		Use:   "decommission NAME",
		Short: "Mark a cluster for decommissioning: its agent removes every unit",
		Long: `decommission sets spec.decommission: true in clusters/NAME.yaml. The next
render gives the cluster an empty slice marked decommission: true; its agent
then prunes every unit it manages, the flotilla-namespaces unit included
(a Namespace that still holds objects Flotilla does not manage is kept).

Without the marker an agent never prunes all of its units, nor more than its
--prune-hold-fraction of them: it holds the prune and reports PruneHeld, so a
cluster that drops out of every fleet by mistake, or whose Cluster file is
removed, keeps its workloads. The marker is the deliberate confirmation.

Run flotilla render afterwards and merge both in one pull request; the diff
shows the marker and every unit leaving the cluster. Once the agent reports
the units gone, remove clusters/NAME.yaml (and uninstall the agent). To undo
before merging, drop the field.`,
		Example: `  # Decommission edge-7, render, and open a pull request
  flotilla cluster decommission edge-7
  flotilla render
  git checkout -b decommission-edge-7 && git commit -am "Decommission edge-7"

  # In a fleet repo elsewhere
  flotilla cluster decommission member3 --repo ./fleet`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runDecommission(c.OutOrStdout(), repo, args[0])
		},
	}
	c.Flags().StringVar(&repo, "repo", repo, "fleet repo directory")
	return c
}

func runDecommission(out io.Writer, repo, name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("cluster name %q: %v", name, errs)
	}
	rel := filepath.Join("clusters", name+".yaml")
	p := filepath.Join(repo, rel)
	data, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("decommission %s: %w", name, err)
	}
	edited, changed, err := setDecommission(data)
	if err != nil {
		return fmt.Errorf("decommission %s: %s: %w", name, rel, err)
	}
	if !changed {
		_, err := fmt.Fprintf(out, "%s already sets spec.decommission: true\n", rel)
		return err
	}
	if err := os.WriteFile(p, edited, 0o644); err != nil {
		return fmt.Errorf("decommission %s: %w", name, err)
	}
	_, err = fmt.Fprintf(out, "%s: set spec.decommission: true\nNext: flotilla render, then merge both in one pull request; the agent of %s prunes every unit.\n", rel, name)
	return err
}

// setDecommission sets spec.decommission: true in a Cluster document,
// keeping its comments and the order of its fields so the pull request
// shows one line.
func setDecommission(data []byte) ([]byte, bool, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrNotCluster, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, false, ErrNotCluster
	}
	top := doc.Content[0]
	if kind := mapValue(top, "kind"); kind == nil || kind.Value != "Cluster" {
		return nil, false, fmt.Errorf("%w: kind is not Cluster", ErrNotCluster)
	}
	spec := mapValue(top, "spec")
	if spec == nil || (spec.Kind == yaml.ScalarNode && spec.Tag == "!!null") {
		if spec == nil {
			top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "spec"}, &yaml.Node{})
			spec = top.Content[len(top.Content)-1]
		}
		*spec = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	spec.Style = 0 // block style: the pull request shows one added line
	if spec.Kind != yaml.MappingNode {
		return nil, false, fmt.Errorf("%w: spec is not a mapping", ErrNotCluster)
	}
	if v := mapValue(spec, "decommission"); v != nil {
		if v.Value == "true" {
			return data, false, nil
		}
		*v = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}
	} else {
		spec.Content = append(spec.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: "decommission"},
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, false, err
	}
	if err := enc.Close(); err != nil {
		return nil, false, err
	}
	return b.Bytes(), true, nil
}

// mapValue is the value node of key in a mapping node, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
