package cmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/hub/dashboard"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
)

func newDashboardCommand() *cobra.Command {
	o := &statusOptions{}
	var listen, commitURL string
	var refresh time.Duration
	c := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a read-only web page of the fleet, from Git alone",
		Long: `dashboard reads the fleet as flotilla status does — clusters/ and fleets/ at
the branch head and every agent's status ref — and serves it as one web page:
every cluster's state (filter by fleet, label or state), its units with
revision, health, last error and drift corrections, the rollout of the branch
head (and the waves of progressive rollouts when --repo is a local clone),
the Volcano jobs with phase, placement and preflight verdict, and each
heartbeat's age.

The fleet is read again every --refresh; the page fetches the new view on
the same interval and swaps it in without reloading. Nothing but Git is
contacted and the page changes nothing: it is safe to share read-only.
Revisions link to their commits when the fleet repo's remote is on
github.com or gitlab.com, or through --commit-url on any forge.

The page also answers /fragment (the part that refreshes), /fleet.json (the
page's model), /healthz and /metrics: the progressive rollouts as Prometheus
gauges (flotilla_rollout_state, flotilla_rollout_waves_released,
flotilla_rollout_clusters, …; see manifests/monitoring/rollout-rules.yaml
for alerts on them), when --repo is a local clone whose applications are
under a rollout. flotilla status -o html writes the same page as one file
that does not refresh.`,
		Example: `  # The fleet of a local clone, on http://127.0.0.1:8080/
  flotilla dashboard --repo ./fleet

  # From the forge, re-read every 30s, reachable from other machines
  flotilla dashboard --repo https://github.com/example/fleet.git --git-credentials-dir ~/.flotilla/git --listen :8080 --refresh 30s

  # Commit links on a self-hosted forge
  flotilla dashboard --repo https://git.example.com/fleet.git --commit-url 'https://git.example.com/fleet/commit/{sha}'`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if refresh <= 0 {
				return fmt.Errorf("--refresh must be positive")
			}
			ro, err := o.sourceOptions()
			if err != nil {
				return err
			}
			return serveDashboard(c, o, ro, listen, refresh, commitURL)
		},
	}
	o.bindSource(c.Flags())
	c.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve on (host:port; port 0 picks a free one)")
	c.Flags().DurationVar(&refresh, "refresh", 10*time.Second, "how often the fleet is read again and the page refreshes itself")
	bindCommitURL(c, &commitURL)
	return c
}

func bindCommitURL(c *cobra.Command, commitURL *string) {
	c.Flags().StringVar(commitURL, "commit-url", "", "link revisions to commits with this URL, "+dashboard.CommitTemplate+" replaced by the hash (default: derived from a github.com or gitlab.com --repo)")
}

// loadDashboard reads the fleet once into the page's model; the snapshot
// comes along for --exit-code.
func loadDashboard(ctx context.Context, o *statusOptions, ro fleetview.ReadOptions, commitURL string) (*dashboard.Model, *fleetview.Snapshot, error) {
	s, err := fleetview.ReadSnapshot(ctx, ro)
	if err != nil {
		return nil, nil, err
	}
	waves, werr := wavesOf(ctx, o)
	m := dashboard.NewModel(s, waves, dashboard.LinkerFor(o.repo, commitURL))
	if werr != nil {
		m.Warnings = append(m.Warnings, werr.Error())
	}
	return m, s, nil
}

// writeStatusHTML is flotilla status -o html.
func writeStatusHTML(c *cobra.Command, o *statusOptions, commitURL string, exitCode bool) error {
	if o.watch {
		return fmt.Errorf("--output html writes one page: use flotilla dashboard for a page that refreshes")
	}
	ro, err := o.sourceOptions()
	if err != nil {
		return err
	}
	m, s, err := loadDashboard(c.Context(), o, ro, commitURL)
	if err != nil {
		return err
	}
	if err := dashboard.WritePage(c.OutOrStdout(), m, dashboard.PageOptions{}); err != nil {
		return err
	}
	if !exitCode {
		return nil
	}
	return reportUnhealthy(c.ErrOrStderr(), s.View.Unhealthy())
}

func serveDashboard(c *cobra.Command, o *statusOptions, ro fleetview.ReadOptions, listen string, refresh time.Duration, commitURL string) error {
	ctx := c.Context()
	srv := &dashboard.Server{
		Refresh: refresh,
		// A read is several Git operations, each bounded by --timeout.
		Timeout: max(2*o.timeout, refresh),
		Load: func(ctx context.Context) (*dashboard.Model, error) {
			m, _, err := loadDashboard(ctx, o, ro, commitURL)
			return m, err
		},
		Errorf:  func(format string, args ...any) { fmt.Fprintf(c.ErrOrStderr(), "error: "+format+"\n", args...) },
		Metrics: dashboard.NewMetrics(),
	}
	if err := srv.Update(ctx); err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	fmt.Fprintf(c.OutOrStdout(), "dashboard: http://%s/ (read-only; refreshes every %s; Ctrl-C to stop)\n", ln.Addr(), refresh)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	go srv.Run(ctx)
	select {
	case err := <-done:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
