package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/pkg/version"
)

// NewRootCommand builds the agent's command; tests call it directly.
func NewRootCommand() *cobra.Command {
	var showVersion bool
	o := &options{}
	root := &cobra.Command{
		Use:   "flotilla-agent",
		Short: "Make this cluster match its slice of the fleet repo",
		Long: `flotilla-agent runs inside a member or edge cluster. Every --interval (±10%)
it pulls the cluster's slice of the fleet repo over Git (ls-remote first, a
shallow fetch only when the branch moved), renders each unit, applies it with
server-side apply, prunes what left it and waits for health, in dependency
order. Unchanged units cost no API writes; objects changed in the cluster are
restored, also while Git is unreachable (from the cached checkout).

Between cycles it polls Git every --poll-interval, if shorter, and so it does
while units wait for health: a newer revision that passes verification and
changes any of the cluster's units ends every wait at once (the units it
changes are reported Superseded) and is reconciled straight away, so a fix
does not wait for the broken revision's timeout. While Git fails, those polls back off so a fleet of agents does not hammer a Git server
that is down: the wait doubles with each consecutive failure (randomised
between half and all of it), from twice --poll-interval up to --interval, and
resets after a successful poll. Cycles, with their own fetch, still run every
--interval.

Configuration comes from flags, from FLOTILLA_<FLAG> environment variables
(e.g. FLOTILLA_CLUSTER_NAME, FLOTILLA_REPO_URL), or from --config: a Flux
GitRepository object whose spec.url, spec.ref.branch, spec.interval,
spec.timeout, spec.sparseCheckout and spec.secretRef are used. spec.secretRef.name
names a directory under --git-credentials-root holding the mounted Secret
(keys username, password, bearerToken, identity, known_hosts, ca.crt).
Precedence: flag, then environment, then --config, then the default.

Each cycle's status document is written to --status-file. /metrics serves
Prometheus metrics; /healthz and /readyz are the probes (ready after the first
reconciled revision, or while standing by for the leader lease).`,
		Example: `  # In a cluster, credentials mounted from a Secret, two replicas with a leader
  flotilla-agent --cluster-name member1 --repo-url https://git.example.com/fleet.git \
    --git-credentials-dir /etc/flotilla/git --leader-elect

  # On a laptop, against a kind cluster, every 30s, text logs
  flotilla-agent --kubeconfig ~/.kube/config --context kind-edge \
    --cluster-name edge-1 --repo-url ssh://git@git.example.com/fleet.git \
    --git-credentials-dir ./creds --interval 30s --cache-dir ./cache --log-format text

  # From a Flux GitRepository file; the flag overrides its interval
  FLOTILLA_CLUSTER_NAME=member1 flotilla-agent --config /etc/flotilla/gitrepository.yaml --interval 2m`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(c *cobra.Command, _ []string) error {
			if showVersion {
				_, err := fmt.Fprintln(c.OutOrStdout(), version.String("flotilla-agent"))
				return err
			}
			if err := applyEnv(c.Flags(), os.LookupEnv); err != nil {
				return err
			}
			if err := o.applyConfigFile(c.Flags()); err != nil {
				return err
			}
			if err := o.finish(os.LookupEnv); err != nil {
				return err
			}
			return run(c.Context(), o, c.ErrOrStderr())
		},
	}
	root.Flags().BoolVar(&showVersion, "version", false, "print the version and exit")
	o.bindFlags(root.Flags())
	root.Flags().SortFlags = false
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the agent version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), version.String("flotilla-agent"))
			return err
		},
	})
	return root
}

// Execute runs the agent and returns the process exit code: 0 after a clean
// shutdown (SIGTERM or SIGINT), 2 for invalid configuration, 1 otherwise
// (including a lost leader lease).
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := NewRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		if errors.Is(err, ErrConfig) {
			return 2
		}
		return 1
	}
	return 0
}
