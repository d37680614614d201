package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"

	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/pkg/compile"
	"github.com/flotilla-gitops/flotilla/pkg/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
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
	Charts compile.ChartVendor
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

// side is one revision, materialized and compiled.
type side struct {
	name   string // "base" or "head"
	commit string // empty for the working tree
	root   string // the fleet repo root of the copy
	// rendered are the committed files under rendered/, fleet-root
	// relative, with their blob hashes (commits only).
	rendered map[string]string
	repo     *fleet.Repo
	// committed reads the side's committed slices (where GlobalJobs are
	// placed already).
	committed compile.SliceReader
	out       *compile.Output
	byName    map[string]*compile.ClusterOutput
	// warnings are the status documents the compile could not use.
	warnings []string
}

// committedSlices reads the commit's slices from rendered/ as committed,
// exporting its slice.yaml files into dir on first use (only a repo with
// BestFit GlobalJobs asks).
func (s *side) committedSlices(ctx context.Context, top, prefix, dir string) compile.SliceReader {
	var once sync.Once
	var exportErr error
	root := filepath.Join(dir, prefix)
	return func(cluster string) (*slice.Slice, error) {
		once.Do(func() {
			var paths []string
			for p := range s.rendered {
				if path.Base(p) == slice.FileName {
					paths = append(paths, path.Join(filepath.ToSlash(prefix), p))
				}
			}
			sort.Strings(paths)
			exportErr = gitrepo.ExportTreePaths(ctx, top, s.commit, dir, paths)
		})
		if exportErr != nil {
			return nil, exportErr
		}
		return slice.Read(root, cluster)
	}
}

// joinWarnings lists a's warnings, then b's that a does not have.
func joinWarnings(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range append(append([]string(nil), a...), b...) {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
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
	head.committed = compile.RenderedAt(repoDir)
	if opts.Head != "" {
		head.committed = head.committedSlices(ctx, top, prefix, filepath.Join(tmp, "head-rendered"))
	}
	po := compile.PipelineOptions{Charts: opts.Charts, StatusRepo: opts.StatusRepo, StatusAuthDir: opts.StatusAuthDir}
	if po.StatusRepo == "" {
		po.StatusRepo = compile.DefaultStatusRepo(repoDir)
	}
	err = both(func() error { return base.compile(ctx, selected, po) }, func() error { return head.compile(ctx, selected, po) })
	if err != nil {
		return nil, err
	}
	p.Warnings = append(p.Warnings, joinWarnings(base.warnings, head.warnings)...)
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
	progress("rendered %d units", pl.rendered)
	return p, nil
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

// gitTop finds the work tree containing dir and dir's path inside it.
func gitTop(dir string) (top, prefix string, err error) {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			rel, err := filepath.Rel(d, dir)
			if err != nil {
				return "", "", err
			}
			if rel == "." {
				rel = ""
			}
			return d, rel, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", fmt.Errorf("plan: %s: %w", dir, ErrNotGitRepo)
		}
		d = parent
	}
}

// copyInputs copies the fleet repo's working tree into dst without .git
// directories and the top-level rendered/: regular files with their
// executable bit, symlinks as they are.
func copyInputs(ctx context.Context, src, dst string) error {
	rendered := filepath.Join(src, slice.RenderedDir)
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if (d.Name() == ".git" && p != src) || p == rendered {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return copyFile(p, target, info.Mode().Perm()&0o755|0o644)
		}
		return nil // sockets, devices: nothing a render reads
	})
}

// export writes the commit's fleet repo inputs (everything under prefix
// but rendered/) into dest and lists the committed rendered/ files.
func (s *side) export(ctx context.Context, top, prefix, dest string) error {
	slashPrefix := filepath.ToSlash(prefix)
	files, err := gitrepo.ListTree(ctx, top, s.commit, slashPrefix)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.rendered = map[string]string{}
	include := map[string]bool{}
	for _, f := range files {
		rel := f.Path
		if slashPrefix != "" {
			rel = strings.TrimPrefix(rel, slashPrefix+"/")
		}
		first, _, _ := strings.Cut(rel, "/")
		if first == slice.RenderedDir {
			s.rendered[rel] = f.Hash
			continue
		}
		include[path.Join(slashPrefix, first)] = true
	}
	if err := gitrepo.ExportTreePaths(ctx, top, s.commit, dest, sortedKeys(include)); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if len(include) == 0 && len(s.rendered) > 0 {
		// Only rendered/: the fleet repo root exists, without inputs.
		return os.MkdirAll(s.root, 0o755)
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (s *side) load(ctx context.Context) error {
	repo, err := fleet.Load(ctx, s.root)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.repo = repo
	return nil
}

// compile compiles the selected clusters this side has (all when selected
// is nil).
func (s *side) compile(ctx context.Context, selected map[string]bool, opts compile.PipelineOptions) error {
	opts.Committed = s.committed
	opts.Warn = func(msg string) { s.warnings = append(s.warnings, msg) }
	if selected != nil {
		for _, c := range s.repo.Clusters {
			if selected[c.Metadata.Name] {
				opts.Clusters = append(opts.Clusters, c.Metadata.Name)
			}
		}
		if len(opts.Clusters) == 0 {
			s.out = &compile.Output{Scope: []string{}}
			s.byName = map[string]*compile.ClusterOutput{}
			return nil
		}
	}
	out, err := compile.Pipeline(ctx, s.repo, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.out = out
	s.byName = make(map[string]*compile.ClusterOutput, len(out.Clusters))
	for _, co := range out.Clusters {
		s.byName[co.Slice.Cluster] = co
	}
	return nil
}

// staleness compares head's committed rendered/ with the fresh compile:
// agents apply what is committed, so a stale rendered/ makes the plan
// (which shows the fresh render) wrong until `flotilla render` runs. A
// commit's files are compared by blob hash, the working tree's on disk.
func staleness(ctx context.Context, head *side, workTree string) (string, error) {
	var differ []string
	if head.commit == "" {
		ch, err := compile.Write(ctx, workTree, head.out, compile.WriteOptions{Check: true})
		if err != nil {
			return "", fmt.Errorf("head: check rendered/: %w", err)
		}
		differ = ch.All()
	} else {
		differ = staleFiles(head.out, head.rendered)
	}
	if len(differ) == 0 {
		return "", nil
	}
	return fmt.Sprintf("rendered/ at head is stale: %d files differ from a fresh render (first: %s). Agents apply the committed rendered/; this plan shows the fresh render. Run `flotilla render` and commit the result.",
		len(differ), differ[0]), nil
}

// staleFiles lists the generated files whose committed blob differs from
// the compile's (missing, changed or no longer generated), within the
// compile's scope, sorted.
func staleFiles(out *compile.Output, committed map[string]string) []string {
	inScope := func(p string) bool { return true }
	if out.Scope != nil {
		dirs := make([]string, len(out.Scope))
		for i, c := range out.Scope {
			dirs[i] = slice.ClusterDir(c) + "/"
		}
		inScope = func(p string) bool {
			for _, d := range dirs {
				if strings.HasPrefix(p, d) {
					return true
				}
			}
			return false
		}
	}
	var differ []string
	generated := map[string]bool{}
	for _, co := range out.Clusters {
		for _, f := range co.Files {
			generated[f.Path] = true
			if committed[f.Path] != gitrepo.BlobHash(f.Data) {
				differ = append(differ, f.Path)
			}
		}
	}
	for p := range committed {
		if !generated[p] && inScope(p) {
			differ = append(differ, p)
		}
	}
	sort.Strings(differ)
	return differ
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

// planner diffs the compiled sides cluster by cluster.
type planner struct {
	opts       Options
	masker     *masker
	base, head *side
	caps       map[string]Capabilities
	notes      noteCollector
	rendered   int
}

// renderJob is one unit render on one side.
type renderJob struct {
	side    *side
	cluster string
	unit    slice.Unit
	objs    []*unstructured.Unstructured
	err     error
}

// unitPair is a unit present on either side of one cluster.
type unitPair struct {
	name       string
	base, head *slice.Unit
	baseJob    *renderJob
	headJob    *renderJob
}

func (pl *planner) run(ctx context.Context, p *Plan) error {
	names := map[string]bool{}
	for n := range pl.base.byName {
		names[n] = true
	}
	for n := range pl.head.byName {
		names[n] = true
	}
	clusters := sortedKeys(names)

	// Pair units and decide what must be rendered: a unit whose hash is the
	// same on both sides renders the same objects (same inputs, same
	// capabilities), so it is skipped without rendering.
	pairs := map[string][]*unitPair{}
	var jobs []*renderJob
	for _, c := range clusters {
		var bs, hs []slice.Unit
		if co := pl.base.byName[c]; co != nil {
			bs = co.Slice.Units
		}
		if co := pl.head.byName[c]; co != nil {
			hs = co.Slice.Units
		}
		byName := map[string]*unitPair{}
		var order []*unitPair
		for i := range hs {
			up := &unitPair{name: hs[i].Name, head: &hs[i]}
			byName[up.name] = up
			order = append(order, up)
		}
		for i := range bs {
			if up, ok := byName[bs[i].Name]; ok {
				up.base = &bs[i]
				continue
			}
			order = append(order, &unitPair{name: bs[i].Name, base: &bs[i]})
		}
		p.Stats.UnitsCompared += len(order)
		for _, up := range order {
			if up.base != nil && up.head != nil && up.base.Hash == up.head.Hash {
				continue
			}
			if up.base != nil {
				up.baseJob = &renderJob{side: pl.base, cluster: c, unit: *up.base}
				jobs = append(jobs, up.baseJob)
			}
			if up.head != nil {
				up.headJob = &renderJob{side: pl.head, cluster: c, unit: *up.head}
				jobs = append(jobs, up.headJob)
			}
		}
		pairs[c] = order
	}
	if err := pl.renderAll(ctx, jobs); err != nil {
		return err
	}
	pl.rendered = len(jobs)
	p.Stats.UnitsRendered = len(jobs)

	for _, c := range clusters {
		cp, err := pl.cluster(c, pairs[c], p)
		if err != nil {
			return err
		}
		if cp == nil {
			continue
		}
		p.Summary.add(cp.Counts)
		p.Clusters = append(p.Clusters, *cp)
	}
	p.Notes = append(p.Notes, pl.notes.notes()...)
	return nil
}

// renderAll prepares every job's unit directory from the compiled files,
// then renders them concurrently.
func (pl *planner) renderAll(ctx context.Context, jobs []*renderJob) error {
	for _, j := range jobs {
		if err := writeUnitDir(j.side, j.cluster, j.unit); err != nil {
			return err
		}
	}
	workers := pl.opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	next := make(chan *renderJob)
	var wg sync.WaitGroup
	for range min(workers, max(1, len(jobs))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				caps := pl.caps[j.cluster]
				res, err := render.Unit(ctx, j.side.root, j.unit, render.Options{
					Capabilities:  render.Capabilities{KubeVersion: caps.KubeVersion, APIVersions: caps.list},
					Limits:        pl.opts.Limits,
					HelmInProcess: pl.opts.HelmInProcess,
				})
				if err != nil {
					j.err = err
					continue
				}
				j.objs = make([]*unstructured.Unstructured, len(res.Objects))
				for i, o := range res.Objects {
					j.objs[i] = pl.masker.normalize(o)
				}
			}
		}()
	}
	for _, j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	return ctx.Err()
}

// writeUnitDir makes the unit directory in a side's copy hold exactly the
// compiled files: the committed rendered/ may be stale or missing.
func writeUnitDir(s *side, cluster string, u slice.Unit) error {
	if !filepath.IsLocal(filepath.FromSlash(u.Path)) {
		return fmt.Errorf("plan: unit path %q: %w", u.Path, compile.ErrUnsafePath)
	}
	dir := filepath.Join(s.root, filepath.FromSlash(u.Path))
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	co := s.byName[cluster]
	prefix := u.Path + "/"
	i := sort.Search(len(co.Files), func(i int) bool { return co.Files[i].Path >= prefix })
	for ; i < len(co.Files) && strings.HasPrefix(co.Files[i].Path, prefix); i++ {
		f := co.Files[i]
		rel := strings.TrimPrefix(f.Path, prefix)
		target := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		if err := os.WriteFile(target, f.Data, 0o644); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
	}
	return nil
}

// cluster builds one cluster's plan; nil when nothing changes.
func (pl *planner) cluster(name string, pairs []*unitPair, p *Plan) (*ClusterPlan, error) {
	cp := &ClusterPlan{Name: name, Change: Changed, Capabilities: pl.caps[name], Units: []UnitPlan{}}
	_, inBase := pl.base.byName[name]
	_, inHead := pl.head.byName[name]
	switch {
	case !inBase:
		cp.Change = Added
	case !inHead:
		cp.Change = Removed
		p.Warnings = append(p.Warnings, fmt.Sprintf("cluster %s leaves the fleet repo: its agent finds no slice and keeps what it applied last; nothing is deleted on it.", name))
	}
	for _, up := range pairs {
		u, err := pl.unit(name, up)
		if err != nil {
			return nil, err
		}
		if u == nil {
			continue
		}
		if u.Error != "" {
			p.Failed = true
		}
		if u.BaseError != "" {
			p.Warnings = append(p.Warnings, fmt.Sprintf("cluster %s unit %s failed to render at base (%s); its head objects are shown as added.", name, u.Name, u.BaseError))
		}
		switch u.Change {
		case Added:
			cp.Counts.UnitsAdded++
		case Removed:
			cp.Counts.UnitsRemoved++
		default:
			cp.Counts.UnitsChanged++
		}
		for _, o := range u.Objects {
			switch o.Change {
			case Added:
				cp.Counts.ObjectsAdded++
			case Removed:
				cp.Counts.ObjectsRemoved++
			default:
				cp.Counts.ObjectsChanged++
			}
		}
		cp.Units = append(cp.Units, *u)
	}
	if len(cp.Units) == 0 && cp.Change == Changed {
		return nil, nil
	}
	cp.Counts.Clusters = 1
	return cp, nil
}

// unit builds one unit's plan; nil when nothing changes.
func (pl *planner) unit(cluster string, up *unitPair) (*UnitPlan, error) {
	u := &UnitPlan{Name: up.name, Objects: []ObjectPlan{}}
	switch {
	case up.base == nil:
		u.Change, u.Kind, u.HeadHash = Added, string(up.head.Kind), up.head.Hash
	case up.head == nil:
		u.Change, u.Kind, u.BaseHash = Removed, string(up.base.Kind), up.base.Hash
	default:
		u.Change, u.Kind, u.BaseHash, u.HeadHash = Changed, string(up.head.Kind), up.base.Hash, up.head.Hash
		u.Settings = settingsDiff(up.base, up.head)
	}
	if up.baseJob == nil && up.headJob == nil {
		// Same hash: only settings can differ.
		if len(u.Settings) == 0 {
			return nil, nil
		}
		return u, nil
	}
	var baseObjs, headObjs []*unstructured.Unstructured
	if j := up.baseJob; j != nil {
		if j.err != nil {
			u.BaseError = j.err.Error()
		}
		baseObjs = j.objs
	}
	if j := up.headJob; j != nil {
		if j.err != nil {
			u.Error = j.err.Error()
			return u, nil
		}
		headObjs = j.objs
	}
	objs, err := diffObjects(baseObjs, headObjs)
	if err != nil {
		return nil, fmt.Errorf("plan: cluster %s unit %s: %w", cluster, up.name, err)
	}
	u.Objects = objs
	pl.notes.observe(cluster, up.name, baseObjs, headObjs)
	if u.Change == Changed && len(objs) == 0 && len(u.Settings) == 0 && u.BaseError == "" {
		return nil, nil // new hash, same objects (e.g. a comment changed)
	}
	return u, nil
}

// settingsDiff lists changes of how a unit is applied.
func settingsDiff(b, h *slice.Unit) []string {
	var out []string
	add := func(field string, before, after any) {
		if fmt.Sprint(before) != fmt.Sprint(after) {
			out = append(out, fmt.Sprintf("%s: %v → %v", field, orNone(before), orNone(after)))
		}
	}
	add("kind", b.Kind, h.Kind)
	add("namespace", b.Namespace, h.Namespace)
	add("dependsOn", strings.Join(b.DependsOn, ","), strings.Join(h.DependsOn, ","))
	add("prune", b.Prune, h.Prune)
	add("allowEmpty", b.AllowEmpty, h.AllowEmpty)
	add("wait", b.Wait, h.Wait)
	add("timeout", b.Timeout.Duration, h.Timeout.Duration)
	if b.Helm != nil && h.Helm != nil {
		add("helm.chart", b.Helm.Chart, h.Helm.Chart)
		add("helm.releaseName", b.Helm.ReleaseName, h.Helm.ReleaseName)
	}
	return out
}

func orNone(v any) any {
	if s, ok := v.(string); ok && s == "" {
		return "(none)"
	}
	if s, ok := v.(slice.UnitKind); ok && s == "" {
		return "(none)"
	}
	return v
}
