package cmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/pkg/version"
)

// Exit codes follow diff(1) for plan and render --check: 0 nothing to do,
// 1 differences found, 2 trouble. status --exit-code uses 1 for a cluster
// Failing, Unreachable or Untrusted.
const (
	ExitOK        = 0
	ExitChanges   = 1
	ExitUnhealthy = 1
	ExitError     = 2
)

// exitError carries an exit code through cobra without printing usage.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// NewRootCommand builds the whole command tree; tests call it directly.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "flotilla",
		Short: "Pull-mode GitOps for fleets of Kubernetes clusters",
		Long: `flotilla is the hub CLI of Flotilla. It renders a per-cluster slice of the
fleet repo into rendered/, shows what a pull request changes on every cluster,
and reads the status every agent commits back to Git.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand())
	root.AddCommand(newRenderCommand(), newValidateCommand(), newPublishCommand())
	root.AddCommand(newInitCommand(), newBootstrapCommand())
	root.AddCommand(newStatusCommand(), newDashboardCommand())
	root.AddCommand(newPlanCommand())
	root.AddCommand(newClusterCommand())
	root.AddCommand(newSecretsCommand())
	root.AddCommand(newRolloutCommand(), newNotifyCommand())
	root.AddCommand(newImportCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the flotilla version",
		Example: "  flotilla version",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), version.String("flotilla"))
			return err
		},
	}
}

// Execute runs the CLI and returns the process exit code.
func Execute() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := NewRootCommand()
	if err := root.ExecuteContext(ctx); err != nil {
		if ee, ok := err.(exitError); ok {
			return ee.code
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		return ExitError
	}
	return ExitOK
}
