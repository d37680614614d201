package plan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sync"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
	"github.com/flotilla-gitops/flotilla/pkg/render"
)

// Classified errors; test with errors.Is.
var (
	// ErrNotGitRepo: the fleet repo directory is not inside a Git work tree.
	ErrNotGitRepo = errors.New("not inside a Git repository")
	// ErrUnknownCluster: --cluster names a cluster neither side has.
	ErrUnknownCluster = errors.New("unknown cluster")
	// ErrUnknownFleet: --fleet names a fleet neither side has.
	ErrUnknownFleet = errors.New("unknown fleet")
)

// WorkingTree is Revision.Ref of a head read from the working tree.
const WorkingTree = "working tree"

// Options configure Compute.
type Options struct {
	// RepoDir is the fleet repo: a Git work tree or a directory inside one
	// (the fleet repo may be a subdirectory of a larger repository).
	RepoDir string
	// Base is the revision the change applies to (e.g. "origin/main").
	Base string
	// Head is the changed revision; empty means the working tree as it is,
	// uncommitted and untracked files included.
	Head string
	// Clusters and Fleets limit the plan to these clusters and the members
	// of these fleets (on either side); both empty means every cluster.
	Clusters []string
	Fleets   []string
	// Charts vendors chart-repository charts into each side's copy; nil
	// uses chartvendor.VendorCharts (offline when charts/ is vendored and
	// locked).
	Charts fleetrender.ChartVendor
	// StatusRepo and StatusAuthDir: where GlobalJob BestFit placement reads
	// the clusters' reported capacity, as for render (empty: the fleet
	// repo's own status refs when RepoDir is a Git repository).
	StatusRepo    string
	StatusAuthDir string
	// Limits bound every unit render, as on the agent.
	Limits render.Limits
	// HelmInProcess is render.Options.HelmInProcess (tests, benchmarks).
	HelmInProcess bool
	// Workers bounds concurrent unit renders; GOMAXPROCS when zero.
	Workers int
	// MaskKey keys the Secret value markers; random when empty (golden
	// tests fix it).
	MaskKey []byte
	// TempDir holds the exported trees while Compute runs; os.TempDir()
	// when empty.
	TempDir string
	// Progress, when set, receives one line per phase (for a terminal).
	Progress func(msg string)
}

// Compute renders both revisions and diffs them. Problems in the inputs
// of either side come back as an error wrapping a fleet.ErrorList; a unit
// that fails to render is reported inside the plan (UnitPlan.Error,
// Plan.Failed), not as an error.
func Compute(ctx context.Context, opts Options) (*Plan, error) {
	start := time.Now()
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf("%s (%.1fs)", fmt.Sprintf(format, args...), time.Since(start).Seconds()))
		}
	}
	if opts.Base == "" {
		return nil, errors.New("plan: a base revision is required")
	}
	repoDir, err := filepath.Abs(opts.RepoDir)
	if err != nil {
		return nil, fmt.Errorf("plan: repo: %w", err)
	}
	top, prefix, err := gitTop(repoDir)
	if err != nil {
		return nil, err
	}
	p := &Plan{APIVersion: APIVersion, Kind: Kind, Notes: []string{}, Warnings: []string{}, Clusters: []ClusterPlan{}}
	p.Base.Ref = opts.Base
	if p.Base.Commit, err = gitrepo.ResolveRevision(top, opts.Base); err != nil {
		return nil, fmt.Errorf("plan: base: %w", err)
	}
	p.Head.Ref = WorkingTree
	if opts.Head != "" {
		p.Head.Ref = opts.Head
		if p.Head.Commit, err = gitrepo.ResolveRevision(top, opts.Head); err != nil {
			return nil, fmt.Errorf("plan: head: %w", err)
		}
	}

	tmp, err := os.MkdirTemp(opts.TempDir, "flotilla-plan-*")
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer os.RemoveAll(tmp)

	// Both sides' inputs are materialized in a temporary directory and
	// compiled, as CI does after `flotilla render`; rendered/ is left out
	// (the unit directories a render needs are written from the compile),
	// and the working tree is never written to.
	base := &side{name: "base", commit: p.Base.Commit, root: filepath.Join(tmp, "base", prefix)}
	head := &side{name: "head", commit: p.Head.Commit, root: filepath.Join(tmp, "head", prefix)}
	err = both(func() error {
		return base.export(ctx, top, prefix, filepath.Join(tmp, "base"))
	}, func() error {
		if opts.Head == "" {
			return copyInputs(ctx, repoDir, head.root)
		}
		return head.export(ctx, top, prefix, filepath.Join(tmp, "head"))
	})
	if err != nil {
		return nil, fmt.Errorf("plan: export: %w", err)
	}
	progress("exported base %s and head %s", short(p.Base.Commit), orWorkingTree(short(p.Head.Commit)))
	for _, s := range []*side{base, head} {
		if _, err := os.Stat(s.root); err != nil {
			return nil, fmt.Errorf("plan: %s: fleet repo directory %s: %w", s.name, prefix, err)
		}
	}
	err = both(func() error { return base.load(ctx) }, func() error { return head.load(ctx) })
	if err != nil {
		return nil, err
	}
	selected, err := selectClusters(base.repo, head.repo, opts.Clusters, opts.Fleets)
	if err != nil {
		return nil, err
	}
	// Each side compiles through the same pipeline as render, placing
	// GlobalJobs from its own committed rendered/ (the working tree's for
	// the working tree).
	base.committed = base.committedSlices(ctx, top, prefix, filepath.Join(tmp, "base-rendered"))
	head.committed = fleetrender.RenderedAt(repoDir)
	if opts.Head != "" {
		head.committed = head.committedSlices(ctx, top, prefix, filepath.Join(tmp, "head-rendered"))
	}
	for _, s := range []*side{base, head} {
		if s.rollout, err = s.committedTree(ctx, top, prefix, filepath.Join(tmp, s.name+"-tree"), repoDir); err != nil {
			return nil, err
		}
	}
	po := fleetrender.PipelineOptions{Charts: opts.Charts, StatusRepo: opts.StatusRepo, StatusAuthDir: opts.StatusAuthDir}
	if po.StatusRepo == "" {
		po.StatusRepo = fleetrender.DefaultStatusRepo(repoDir)
	}
	err = both(func() error { return base.compile(ctx, selected, po) }, func() error { return head.compile(ctx, selected, po) })
	if err != nil {
		return nil, err
	}
	p.Warnings = append(p.Warnings, joinWarnings(base.warnings, head.warnings)...)
	p.Warnings = append(p.Warnings, undeclaredNamespaces(base.out, head.out)...)
	progress("compiled %d and %d clusters", len(base.out.Clusters), len(head.out.Clusters))
	if w, err := staleness(ctx, head, repoDir); err != nil {
		return nil, err
	} else if w != "" {
		p.Warnings = append(p.Warnings, w)
	}

	caps, warns, err := clusterCapabilities(ctx, top, base.repo, head.repo)
	if err != nil {
		return nil, err
	}
	p.Warnings = append(p.Warnings, warns...)

	pl := &planner{
		opts:   opts,
		masker: newMasker(opts.MaskKey),
		base:   base,
		head:   head,
		caps:   caps,
	}
	if err := pl.run(ctx, p); err != nil {
		return nil, err
	}
	p.Notes = append(p.Notes, rolloutNotes(base.out, head.out)...)
	p.Notes = append(p.Notes, suspendedNotes(head.out)...)
	progress("rendered %d units", pl.rendered)
	return p, nil
}

// undeclaredNamespaces are head's warnings of a namespace nothing creates
// on a cluster (the agent's apply will fail there) that base does not
// have: the ones this change brings. render and validate report them all.
func undeclaredNamespaces(base, head *fleetrender.Output) []string {
	had := map[string]bool{}
	for _, w := range base.Warnings {
		had[w.Error()] = true
	}
	var out []string
	for _, w := range head.Warnings {
		if errors.Is(w, fleetrender.ErrUndeclaredNamespace) && !had[w.Error()] {
			out = append(out, "the apply will fail: "+w.Error())
		}
	}
	return out
}

// suspendedText says what a suspended unit means for the plan's changes.
const suspendedText = "the agent leaves this unit as it is (nothing applied or pruned) until it is unsuspended"

// suspendedNotes name, per application unit, the clusters whose head
// slice suspends it.
func suspendedNotes(head *fleetrender.Output) []string {
	on := map[string][]string{}
	for _, co := range head.Clusters {
		for _, u := range co.Slice.Units {
			if u.Suspend {
				on[u.Name] = append(on[u.Name], co.Slice.Cluster)
			}
		}
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(on)) {
		cls := on[name]
		shown := cls
		if len(shown) > maxNoteClusters {
			shown = shown[:maxNoteClusters]
		}
		list := strings.Join(shown, ", ")
		if len(cls) > len(shown) {
			list += fmt.Sprintf(" and %d more", len(cls)-len(shown))
		}
		out = append(out, fmt.Sprintf("%s is Suspended on %s: %s.", name, plural.Count(len(cls), "cluster", "clusters")+" "+list, suspendedText))
	}
	return out
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func orWorkingTree(s string) string {
	if s == "" {
		return WorkingTree
	}
	return s
}

// both runs a and b concurrently and joins their errors.
func both(a, b func() error) error {
	var wg sync.WaitGroup
	var errA error
	wg.Add(1)
	go func() {
		defer wg.Done()
		errA = a()
	}()
	errB := b()
	wg.Wait()
	return errors.Join(errA, errB)
}

// selectClusters resolves --cluster and --fleet on both sides; nil means
// every cluster.
func selectClusters(base, head *fleet.Repo, clusters, fleets []string) (map[string]bool, error) {
	if len(clusters) == 0 && len(fleets) == 0 {
		return nil, nil
	}
	sel := map[string]bool{}
	for _, name := range clusters {
		if base.Cluster(name) == nil && head.Cluster(name) == nil {
			return nil, fmt.Errorf("plan: --cluster %q: %w", name, ErrUnknownCluster)
		}
		sel[name] = true
	}
	for _, name := range fleets {
		found := false
		for _, r := range []*fleet.Repo{base, head} {
			if f := r.Fleet(name); f != nil {
				found = true
				for _, c := range r.Members(f) {
					sel[c.Metadata.Name] = true
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("plan: --fleet %q: %w", name, ErrUnknownFleet)
		}
	}
	return sel, nil
}
