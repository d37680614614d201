package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/gitsource"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

// progressEvery is how often (in clusters) render reports progress.
const progressEvery = 500

type renderOptions struct {
	repo     string
	check    bool
	clusters []string
	output   string
	progress bool
	// statusRepo and authDir: where BestFit placement reads the clusters'
	// reported capacity (render_capacity.go).
	statusRepo string
	authDir    string
	// allWaves releases every wave of every rollout at once.
	allWaves bool
	// updateSources re-resolves Git sources' refs; sourceAuthDir holds
	// their credentials.
	updateSources bool
	sourceAuthDir string
	registry      registryFlags
}

func newRenderCommand() *cobra.Command {
	o := &renderOptions{}
	c := &cobra.Command{
		Use:   "render",
		Short: "Render every cluster's slice into rendered/",
		Long: `render compiles the fleet repo — clusters/, fleets/ and apps/ — into one slice
per cluster under rendered/<bucket>/<cluster>/: slice.yaml lists the units the
cluster runs in dependency order, and each unit directory holds the generated
kustomization.yaml (and values.yaml for Helm) that the cluster's agent builds.
Charts from chart repositories and OCI registries (oci://) are vendored into
charts/ first (offline when already vendored and locked); registry
credentials come from Helm's or Docker's registry config or the
--registry-* flags and are never written to the repo. Applications' external
Git sources (spec.source.git) are vendored into sources/<app>/, pinned by
sources/<app>.lock.yaml: a branch stays at its pinned commit until
--update-sources resolves it again, so the move shows in the pull request.
With --check, a vendored copy that no longer matches its pinned commit (or a
lock that no longer matches its application) fails too; --check uses no
network.

The output is deterministic: files whose content did not change are not
touched, stale clusters, units and files are removed. Commit rendered/ (and
charts/, sources/) in the same pull request as the change; in CI, --check
fails when they are stale.

Exit codes: 0 done (or up to date with --check), 1 --check found files that
differ, 2 invalid input or another error.`,
		Example: `  # Render the fleet repo in the current directory
  flotilla render

  # In CI: fail (exit 1) and name the files when rendered/ is stale
  flotilla render --check --repo ./fleet

  # Move every Git source's branch or tag to its current commit
  flotilla render --update-sources --source-credentials-dir ./git-creds

  # Re-render two clusters only; other clusters' directories are left alone
  flotilla render --cluster member1 --cluster edge-1

  # Machine-readable summary
  flotilla render --check -o json

  # oci:// charts from a registry with a private CA, logged in from CI
  echo "$REGISTRY_TOKEN" | flotilla render --registry-username ci \
      --registry-password-stdin --registry-ca-file ca.crt`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			charts, err := o.registry.vendor(c.InOrStdin())
			if err != nil {
				return err
			}
			return runRender(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), o, charts)
		},
	}
	f := c.Flags()
	f.StringVar(&o.repo, "repo", ".", "fleet repo directory")
	f.BoolVar(&o.check, "check", false, "write nothing; exit 1 and list the files when rendered/ differs from a fresh render")
	f.StringArrayVar(&o.clusters, "cluster", nil, "render only this cluster (repeatable); other clusters' directories are left alone")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	f.BoolVar(&o.progress, "progress", false, "report progress on stderr even when it is not a terminal")
	f.StringVar(&o.statusRepo, "status-repo", "", "where GlobalJob BestFit placement reads the clusters' status (capacity): a URL or directory (default: --repo's own status refs when it is a Git repository)")
	f.StringVar(&o.authDir, "git-credentials-dir", "", "directory with Git credentials for --status-repo (files username, password, bearerToken, identity, known_hosts, ca.crt)")
	f.BoolVar(&o.updateSources, "update-sources", false, "resolve every Git source's branch or tag again and vendor the commit it names now (without it, sources stay at the commit their lock pins)")
	f.StringVar(&o.sourceAuthDir, "source-credentials-dir", "", "directory with credentials for the applications' Git sources (files username, password, bearerToken, identity, known_hosts, ca.crt); never written to the repo")
	f.BoolVar(&o.allWaves, "all-waves", false, "EMERGENCY: release every wave of every rollout at once (recorded in rendered/rollouts/ and named by plan)")
	o.registry.add(f)
	return c
}

// renderSummary is the -o json document of render.
type renderSummary struct {
	Repo     string               `json:"repo"`
	Check    bool                 `json:"check"`
	UpToDate bool                 `json:"upToDate"`
	Clusters int                  `json:"clusters"`
	Units    int                  `json:"units"`
	Charts   []chartSummary       `json:"charts,omitempty"`
	Sources  []sourceSummary      `json:"sources,omitempty"`
	Changes  *fleetrender.Changes `json:"changes,omitempty"`
	Warnings []errorSummary       `json:"warnings,omitempty"`
	Notes    []string             `json:"notes,omitempty"`
	Errors   []errorSummary       `json:"errors,omitempty"`
	Seconds  float64              `json:"seconds"`
	Scope    []string             `json:"scope,omitempty"`
}

type chartSummary struct {
	Repo    string `json:"repo"`
	Chart   string `json:"chart"`
	Version string `json:"version"`
	Digest  string `json:"digest,omitempty"`
	// ManifestDigest is the OCI manifest digest of an oci:// chart.
	ManifestDigest string `json:"manifestDigest,omitempty"`
	Path           string `json:"path"`
}

type sourceSummary struct {
	App    string `json:"app"`
	URL    string `json:"url"`
	Ref    string `json:"ref"`
	Path   string `json:"path,omitempty"`
	Commit string `json:"commit"`
	Dir    string `json:"dir"`
	Action string `json:"action"`
}

type errorSummary struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Field   string `json:"field,omitempty"`
	Class   string `json:"class,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Message string `json:"message"`
}

func summarizeErrors(l fleet.ErrorList) []errorSummary {
	out := make([]errorSummary, 0, len(l))
	for _, e := range l {
		s := errorSummary{File: e.File, Line: e.Line, Field: e.Field, Detail: e.Detail, Message: e.Error()}
		if e.Kind != nil {
			s.Class = e.Kind.Error()
		}
		out = append(out, s)
	}
	return out
}

func checkOutputFormat(format string) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("--output %q: want text or json", format)
	}
	return nil
}

// runRender renders; charts vendors chart references (nil:
// chartvendor.VendorCharts).
func runRender(ctx context.Context, stdout, stderr io.Writer, o *renderOptions, charts fleetrender.ChartVendor) error {
	if err := checkOutputFormat(o.output); err != nil {
		return err
	}
	start := time.Now()
	root, err := filepath.Abs(o.repo)
	if err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	sum := &renderSummary{Repo: o.repo, Check: o.check}
	repo, err := loadRepo(ctx, root)
	if repo != nil {
		sum.Warnings = summarizeErrors(repo.Warnings)
		printWarnings(stderr, repo.Warnings)
	}
	if err != nil {
		return reportInputErrors(stdout, stderr, o.output, sum, err)
	}
	if o.allWaves {
		fmt.Fprintln(stderr, "WARNING: --all-waves: every wave of every rollout is released at once; no cluster is held")
	}
	progress := newProgress(stderr, o.progress)
	statusRepo := o.statusRepo
	if statusRepo == "" {
		statusRepo = fleetrender.DefaultStatusRepo(root)
	}
	sources, err := sourceOptions(o)
	if err != nil {
		return err
	}
	out, err := fleetrender.Pipeline(ctx, repo, fleetrender.PipelineOptions{
		Sources:       sources,
		Clusters:      o.clusters,
		Charts:        charts,
		Progress:      progress.clusters,
		StatusRepo:    statusRepo,
		StatusAuthDir: o.authDir,
		Warn:          func(msg string) { fmt.Fprintf(stderr, "warning: %s\n", msg) },
		Rollout:       &fleetrender.RolloutOptions{AllWaves: o.allWaves},
	})
	var stale *gitsource.StaleError
	if errors.As(err, &stale) {
		return reportStaleSources(stdout, o.output, sum, stale)
	}
	if err != nil {
		return reportInputErrors(stdout, stderr, o.output, sum, err)
	}
	sum.Warnings = append(sum.Warnings, summarizeErrors(out.Warnings)...)
	printWarnings(stderr, out.Warnings)
	printNotes(stderr, out.Notes)
	sum.Notes = out.Notes
	ch, err := fleetrender.Write(ctx, root, out, fleetrender.WriteOptions{Check: o.check, Progress: progress.files})
	if err != nil {
		return err
	}
	sum.Clusters = len(out.Clusters)
	for _, co := range out.Clusters {
		sum.Units += len(co.Slice.Units)
	}
	for _, v := range out.Charts {
		sum.Charts = append(sum.Charts, chartSummary{Repo: v.Ref.Repo, Chart: v.Ref.Chart, Version: v.Version, Digest: v.Digest, ManifestDigest: v.ManifestDigest, Path: v.Path})
	}
	for _, r := range out.Sources {
		sum.Sources = append(sum.Sources, sourceSummary{App: r.App, URL: r.URL, Ref: r.Ref.String(), Path: r.Path, Commit: r.Commit, Dir: r.Dir, Action: r.Action})
		if r.Action != "unchanged" && o.output != "json" {
			fmt.Fprintf(stdout, "source %s: %s %s (%s of %s) into %s/\n", r.App, r.Action, shortHash(r.Commit), r.Ref, r.URL, r.Dir)
		}
	}
	sum.Scope = out.Scope
	sum.Changes = &ch
	sum.UpToDate = ch.Empty()
	sum.Seconds = time.Since(start).Seconds()
	if o.output == "json" {
		if err := writeJSON(stdout, sum); err != nil {
			return err
		}
	} else {
		printRenderText(stdout, sum, &ch)
	}
	if o.check && !ch.Empty() {
		return exitError{code: ExitChanges}
	}
	return nil
}

// sourceOptions are the Git source settings of render's flags.
func sourceOptions(o *renderOptions) (gitsource.Options, error) {
	so := gitsource.Options{Update: o.updateSources, Check: o.check}
	if o.check && o.updateSources {
		return so, errors.New("--check and --update-sources do not go together: --check changes nothing")
	}
	if o.sourceAuthDir != "" {
		auth, err := gitrepo.LoadAuth(o.sourceAuthDir)
		if err != nil {
			return so, err
		}
		so.Auth = auth
	}
	return so, nil
}

// reportStaleSources prints what --check found stale under sources/ and
// exits 1, like stale rendered/ files.
func reportStaleSources(stdout io.Writer, format string, sum *renderSummary, stale *gitsource.StaleError) error {
	if format == "json" {
		for _, p := range stale.Problems {
			sum.Errors = append(sum.Errors, errorSummary{File: p.File, Class: gitsource.ErrStale.Error(), Message: p.String()})
		}
		if err := writeJSON(stdout, sum); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "sources/ is stale: %s; run `flotilla render` and commit the result:\n", plural.Count(len(stale.Problems), "Git source differs", "Git sources differ"))
		for _, p := range stale.Problems {
			fmt.Fprintf(stdout, "  %s\n", p)
		}
	}
	return exitError{code: ExitChanges}
}

func printRenderText(w io.Writer, sum *renderSummary, ch *fleetrender.Changes) {
	what := plural.Count(sum.Clusters, "cluster", "clusters") + ", " + plural.Count(sum.Units, "unit", "units")
	switch {
	case sum.Check && ch.Empty():
		fmt.Fprintf(w, "rendered/ is up to date (%s)\n", what)
	case sum.Check:
		n := len(ch.Added) + len(ch.Changed) + len(ch.Removed)
		fmt.Fprintf(w, "rendered/ is stale: %s from a fresh render (%s); run `flotilla render` and commit the result:\n", plural.Count(n, "file differs", "files differ"), what)
		for _, p := range ch.Added {
			fmt.Fprintf(w, "  missing  %s\n", p)
		}
		for _, p := range ch.Changed {
			fmt.Fprintf(w, "  differs  %s\n", p)
		}
		for _, p := range ch.Removed {
			fmt.Fprintf(w, "  stale    %s\n", p)
		}
	case ch.Empty():
		fmt.Fprintf(w, "rendered %s: nothing changed\n", what)
	default:
		fmt.Fprintf(w, "rendered %s: %s added, %d changed, %d removed\n",
			what, plural.Count(len(ch.Added), "file", "files"), len(ch.Changed), len(ch.Removed))
	}
}

// loadRepo loads the fleet repo; input problems come back as a
// fleet.ErrorList.
func loadRepo(ctx context.Context, root string) (*fleet.Repo, error) {
	return fleet.Load(ctx, root)
}

// reportInputErrors prints a fleet.ErrorList one problem per line (or as
// JSON) and turns it into exit code 2; other errors pass through.
func reportInputErrors(stdout, stderr io.Writer, format string, sum any, err error) error {
	var list fleet.ErrorList
	if !errors.As(err, &list) {
		return err
	}
	if format == "json" {
		switch s := sum.(type) {
		case *renderSummary:
			s.Errors = summarizeErrors(list)
		case *validateSummary:
			s.Errors = summarizeErrors(list)
		case *importSummary:
			s.Errors = summarizeErrors(list)
		}
		if werr := writeJSON(stdout, sum); werr != nil {
			return werr
		}
	}
	for _, e := range list {
		fmt.Fprintln(stderr, e.Error())
	}
	fmt.Fprintf(stderr, "%s found\n", plural.Count(len(list), "problem", "problems"))
	return exitError{code: ExitError}
}

// printNotes prints what the compiler decided on the user's behalf.
func printNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func printWarnings(w io.Writer, l fleet.ErrorList) {
	for _, e := range l {
		fmt.Fprintf(w, "warning: %s\n", e.Error())
	}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// progress reports on stderr for large fleets, only when stderr is a
// terminal or --progress asked for it.
type progress struct {
	w       io.Writer
	enabled bool
}

func newProgress(w io.Writer, force bool) *progress {
	return &progress{w: w, enabled: force || isTerminal(w)}
}

func (p *progress) clusters(done, total int) {
	if !p.enabled || total < progressEvery {
		return
	}
	if done%progressEvery == 0 || done == total {
		fmt.Fprintf(p.w, "compiled %d/%d clusters\n", done, total)
	}
}

// filesEvery is how often (in files) writing reports progress.
const filesEvery = 20000

func (p *progress) files(done, total int) {
	if !p.enabled || total < filesEvery {
		return
	}
	if done%filesEvery == 0 || done == total {
		fmt.Fprintf(p.w, "wrote %d/%d files\n", done, total)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
