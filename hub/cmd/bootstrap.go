package cmd

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/hub/bootstrap"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
)

// Output forms of bootstrap.
const (
	bootstrapOutputYAML      = "yaml"
	bootstrapOutputKustomize = "kustomize-dir"
	// installFileName is the -o yaml file written into --output-dir.
	installFileName = "flotilla-agent.yaml"
)

type bootstrapOptions struct {
	repo              string
	labels            []string
	repoURL           string
	branch            string
	interval          time.Duration
	gitTransport      string
	namespace         string
	credentialsSecret string
	image             string
	output            string
	outputDir         string
	force             bool
	sopsAgeKey        string
}

func newBootstrapCommand() *cobra.Command {
	o := &bootstrapOptions{}
	c := &cobra.Command{
		Use:   "bootstrap CLUSTER",
		Short: "Register a cluster in the fleet repo and produce its agent install manifests",
		Long: `bootstrap does, from the hub and without reaching the cluster, what
flux bootstrap does: it registers CLUSTER in the fleet repo at --repo as
clusters/CLUSTER.yaml, with the given --label values (they decide which
fleets and syncPolicies select it), validates the repo with it, and prints
the manifests that install CLUSTER's agent: the Flotilla Kustomize base with
an overlay wiring in the cluster name, --repo-url, --branch, the status ref
(refs/heads/flotilla/status/CLUSTER) and the Git credentials Secret.

A cluster that is already registered is refused unless --force, which sets
the given labels in its file and keeps everything else in it.

--repo-url is the fleet repo as the agent reaches it; it defaults to the
origin remote of --repo (git@host:path is turned into ssh://). Credentials
never go into the URL: they would be stored in a ConfigMap. The agent reads
them from the Secret --credentials-secret, mounted into its pods with the
keys of a Flux Git secret (username, password, bearerToken, identity,
known_hosts, ca.crt). Left at its default, the install includes that Secret
as an empty template to fill in the cluster; another name means you create
and manage the Secret yourself.

Output (-o):
  yaml           one YAML stream, on stdout or into --output-dir/` + installFileName + `
  kustomize-dir  a Kustomize directory in --output-dir: base/ and the generated
                 overlay (kustomization.yaml, agent-config.yaml), to commit and
                 adapt; kubectl apply --server-side -k DIR

--sops-age-key generate makes the cluster its own age key for SOPS-encrypted
files: the public recipient goes into clusters/CLUSTER.yaml as
spec.sops.ageRecipient (list it for .sops.yaml with flotilla secrets
recipients), the private identity only into the install manifests, as the
Secret ` + bootstrap.SOPSAgeSecret + ` (key ` + bootstrap.SOPSAgeSecretKey + `) the agent decrypts with. Those
manifests then hold a private key: apply them, never commit them.
--sops-age-key FILE uses an existing age identity file instead. With
--force on a registered cluster this replaces its key (see "Secrets" in
docs/fleet-repo.md for the rotation procedure).

Then: commit clusters/CLUSTER.yaml, run flotilla render, commit rendered/,
create the credentials Secret in the cluster and apply the manifests.`,
		Example: `  # Register member3 and install its agent straight away
  flotilla bootstrap member3 --repo ./fleet --label env=production --label region=eu-west-1 \
    --repo-url https://git.example.com/platform/fleet.git > member3-agent.yaml
  kubectl create namespace flotilla-system
  kubectl -n flotilla-system create secret generic flotilla-git-credentials \
    --from-literal=username=git --from-file=password=./token
  kubectl apply --server-side -f member3-agent.yaml

  # An edge cluster that fetches only its slice (the fleet repo's CI runs
  # flotilla publish after every merge), SSH access with your own Secret,
  # manifests as a Kustomize directory
  flotilla bootstrap edge-7 --label type=edge,env=production --git-transport slice \
    --repo-url ssh://git@git.example.com/platform/fleet.git \
    --credentials-secret fleet-deploy-key -o kustomize-dir --output-dir ./install/edge-7

  # Re-label an existing cluster and print its install again
  flotilla bootstrap member1 --label tier=gold --force

  # Give member3 its own age key for SOPS-encrypted Secrets (the manifests hold it: do not commit them)
  flotilla bootstrap member3 --label env=production --sops-age-key generate \
    --repo-url https://git.example.com/platform/fleet.git > member3-agent.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runBootstrap(c, args[0], o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.repo, "repo", ".", "fleet repo directory")
	f.StringArrayVarP(&o.labels, "label", "l", nil, "cluster label key=value (repeatable, or comma-separated)")
	f.StringVar(&o.repoURL, "repo-url", "", "fleet repo URL as the agent reaches it, https:// or ssh:// (default: the origin remote of --repo)")
	f.StringVar(&o.branch, "branch", bootstrap.DefaultBranch, "branch the agent follows")
	f.DurationVar(&o.interval, "interval", 0, "agent reconcile interval (default: the manifests' 1m)")
	f.StringVar(&o.gitTransport, "git-transport", "", "what the agent fetches: auto (its slice ref once CI publishes it, the template's flotilla-publish job, else the branch), slice (its slice ref only) or branch (the whole tree of --branch, which grows with the fleet) (default: the manifests' auto)")
	f.StringVar(&o.namespace, "namespace", bootstrap.DefaultNamespace, "namespace of the agent")
	f.StringVar(&o.credentialsSecret, "credentials-secret", bootstrap.DefaultCredentialsSecret, "Secret with the Git credentials, in --namespace")
	f.StringVar(&o.image, "image", bootstrap.DefaultImage(), "agent image (name:tag or name@digest)")
	f.StringVarP(&o.output, "output", "o", bootstrapOutputYAML, "output: yaml or kustomize-dir")
	f.StringVar(&o.outputDir, "output-dir", "", "write the manifests here instead of stdout (required for kustomize-dir)")
	f.BoolVar(&o.force, "force", false, "update an already registered cluster; write into a non-empty --output-dir")
	f.StringVar(&o.sopsAgeKey, "sops-age-key", "", "give the cluster an age key for SOPS files: \"generate\", or an age identity file; its recipient goes into the Cluster file, the private key into the install manifests only")
	return c
}

func runBootstrap(c *cobra.Command, cluster string, o *bootstrapOptions) error {
	ctx := c.Context()
	if o.output != bootstrapOutputYAML && o.output != bootstrapOutputKustomize {
		return fmt.Errorf("%w: -o %q: want %s or %s", bootstrap.ErrInvalidOption, o.output, bootstrapOutputYAML, bootstrapOutputKustomize)
	}
	if o.output == bootstrapOutputKustomize && o.outputDir == "" {
		return fmt.Errorf("%w: -o %s needs --output-dir", bootstrap.ErrInvalidOption, bootstrapOutputKustomize)
	}
	labels, err := parseLabels(o.labels)
	if err != nil {
		return err
	}
	repoURL := o.repoURL
	if repoURL == "" {
		remote, err := gitrepo.RemoteURL(o.repo, "origin")
		if err != nil {
			return fmt.Errorf("%w: --repo-url is required: %w", bootstrap.ErrInvalidOption, err)
		}
		repoURL = bootstrap.RepoURLFromRemote(remote)
	}
	ageKey, recipient, err := bootstrapAgeKey(o.sopsAgeKey)
	if err != nil {
		return err
	}
	install := bootstrap.InstallOptions{
		Cluster: cluster, RepoURL: repoURL, Branch: o.branch, Interval: o.interval, GitTransport: o.gitTransport,
		Namespace: o.namespace, CredentialsSecret: o.credentialsSecret, Image: o.image,
		SOPSAgeKey: ageKey,
	}
	// Check the install before touching the repo: a bad flag must not leave
	// a registered cluster behind.
	if _, err := install.Settings(); err != nil {
		return err
	}
	if o.outputDir != "" && !o.force {
		if err := refuseNonEmpty(o.outputDir, o.output); err != nil {
			return err
		}
	}

	reg, err := bootstrap.Register(ctx, o.repo, bootstrap.Cluster{Name: cluster, Labels: labels, AgeRecipient: recipient}, bootstrap.RegisterOptions{Force: o.force})
	if err != nil {
		return err
	}
	stderr := c.ErrOrStderr()
	verb := "Registered"
	if !reg.Created {
		verb = "Updated"
	}
	fmt.Fprintf(stderr, "%s cluster %s in %s.\n", verb, cluster, filepath.Join(o.repo, filepath.FromSlash(reg.File)))
	if len(reg.Problems) > 0 {
		fmt.Fprintf(stderr, "warning: the fleet repo has other problems (flotilla render will refuse it until they are fixed):\n%v\n", reg.Problems)
	}

	var written string
	switch {
	case o.output == bootstrapOutputKustomize:
		if _, err := bootstrap.WriteInstallDir(ctx, o.outputDir, install, o.force); err != nil {
			return err
		}
		written = o.outputDir
	default:
		y, err := bootstrap.InstallYAML(ctx, install)
		if err != nil {
			return err
		}
		if o.outputDir == "" {
			if _, err := c.OutOrStdout().Write(y); err != nil {
				return err
			}
			break
		}
		if err := os.MkdirAll(o.outputDir, 0o755); err != nil {
			return err
		}
		written = filepath.Join(o.outputDir, installFileName)
		if err := os.WriteFile(written, y, 0o644); err != nil {
			return err
		}
	}
	if written != "" {
		fmt.Fprintf(stderr, "Wrote the agent install manifests to %s.\n", written)
	}
	printBootstrapNextSteps(stderr, o, install, reg.File, written)
	return nil
}

// refuseNonEmpty fails before anything is written when the output would
// land in a directory that already holds files.
func refuseNonEmpty(dir, output string) error {
	var check string
	if output == bootstrapOutputYAML {
		check = filepath.Join(dir, installFileName)
		if _, err := os.Stat(check); err == nil {
			return fmt.Errorf("%s: %w (use --force to replace it)", check, bootstrap.ErrNotEmpty)
		}
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // missing: it will be created
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s: %w (use --force to write into it)", dir, bootstrap.ErrNotEmpty)
	}
	return nil
}

func printBootstrapNextSteps(w io.Writer, o *bootstrapOptions, in bootstrap.InstallOptions, clusterFile, written string) {
	apply := "kubectl apply --server-side -f <the manifests printed on stdout>"
	switch {
	case o.output == bootstrapOutputKustomize:
		apply = "kubectl apply --server-side -k " + written
	case written != "":
		apply = "kubectl apply --server-side -f " + written
	}
	fmt.Fprintf(w, "\nThe agent will follow %s on branch %s and commit its status to %s.\nNext:\n", in.RepoURL, in.Branch, in.StatusRef())
	fmt.Fprintf(w, "  1. commit %s, run flotilla render --repo %s and commit rendered/ (a pull request)\n", clusterFile, o.repo)
	secret := in.CredentialsSecret
	if secret == "" {
		secret = bootstrap.DefaultCredentialsSecret
	}
	fmt.Fprintf(w, "  2. in the cluster, put the Git credentials into the Secret %s/%s\n", in.Namespace, secret)
	fmt.Fprintf(w, "  3. %s\n", apply)
	if len(in.SOPSAgeKey) > 0 {
		fmt.Fprintf(w, "The manifests hold the cluster's private age key (Secret %s/%s): do not commit them.\n", in.Namespace, bootstrap.SOPSAgeSecret)
		fmt.Fprintf(w, "Encrypt its Secrets for the recipients flotilla secrets recipients --repo %s prints.\n", o.repo)
	}
}

// bootstrapAgeKey reads --sops-age-key: "" (no key), "generate" or an age
// identity file. It returns the identity file content and its recipient.
func bootstrapAgeKey(flag string) ([]byte, string, error) {
	switch flag {
	case "":
		return nil, "", nil
	case "generate":
		return sopsdecrypt.GenerateKey()
	}
	data, err := os.ReadFile(flag)
	if err != nil {
		return nil, "", fmt.Errorf("%w: --sops-age-key: %w", bootstrap.ErrInvalidOption, err)
	}
	recipient, err := sopsdecrypt.RecipientOf(data)
	if err != nil {
		return nil, "", fmt.Errorf("%w: --sops-age-key %s: %w", bootstrap.ErrInvalidOption, flag, err)
	}
	return data, recipient, nil
}

// parseLabels reads --label key=value flags (also comma-separated).
func parseLabels(flags []string) (map[string]string, error) {
	labels := map[string]string{}
	for _, flag := range flags {
		for _, kv := range strings.Split(flag, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%w: --label %q: want key=value", bootstrap.ErrInvalidOption, kv)
			}
			if old, dup := labels[k]; dup && old != v {
				return nil, fmt.Errorf("%w: --label %s given twice (%q and %q)", bootstrap.ErrInvalidOption, k, old, v)
			}
			labels[k] = v
		}
	}
	return labels, nil
}
