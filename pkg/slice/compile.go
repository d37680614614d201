package slice

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-gitops/flotilla/pkg/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/placement"
)

// ChartRef is a chart from a chart repository, as an Application names it.
// Version may be a semver range.
type ChartRef struct {
	Repo    string
	Chart   string
	Version string
}

// VendoredChart is a chart-repo chart pinned and copied into the fleet repo.
type VendoredChart struct {
	Ref ChartRef
	// Version is the exact version the range resolved to.
	Version string
	// Digest is "sha256:<hex>" of the chart archive, as locked.
	Digest string
	// Path is the chart directory, repo-relative: charts/<chart>/<version>.
	Path string
}

// ChartVendor pins and vendors chart-repo charts into the repo and returns
// one VendoredChart per ref. The hub passes pkg/render's VendorCharts
// (pkg/render imports this package, so it cannot be called from here).
type ChartVendor func(ctx context.Context, repoRoot string, refs []ChartRef) ([]VendoredChart, error)

// CompileOptions tune Compile.
type CompileOptions struct {
	// Clusters limits the compile to the named clusters; empty means all.
	Clusters []string
	// Charts vendors chart-repo charts. Required when an application uses a
	// chart repository, unless ValidateOnly.
	Charts ChartVendor
	// ValidateOnly checks everything that can fail without vendoring charts;
	// helm units of chart-repo charts get no chart path and their hashes
	// leave the chart out, so the Output must not be written.
	ValidateOnly bool
	// Progress, when set, is called after each cluster is compiled.
	Progress func(done, total int)
	// Capacity is the clusters' reported capacity for GlobalJob BestFit
	// placement (volcano.go); nil falls back to Cluster.spec.capacity.
	Capacity CapacitySource
}

// Output is a compiled fleet: every cluster's slice and generated files.
type Output struct {
	// Clusters are sorted by name.
	Clusters []*ClusterOutput
	// Scope is nil when every cluster was compiled; else the compiled
	// clusters' names, and Write leaves other clusters' directories alone.
	Scope []string
	// Charts are the vendored chart-repo charts, sorted by path.
	Charts []VendoredChart
	// Warnings are problems that do not stop the render.
	Warnings fleet.ErrorList
}

// ClusterOutput is one cluster's slice and its files.
type ClusterOutput struct {
	Slice *Slice
	// Files are every generated file of the cluster, slice.yaml included,
	// sorted by path. Files with equal content share Data.
	Files []File
}

// File is one generated file.
type File struct {
	// Path is slash-separated and relative to the repo root.
	Path string
	Data []byte
}

// Generated file names inside a unit directory.
const (
	KustomizationFile = "kustomization.yaml"
	ValuesFile        = "values.yaml"
	NamespacesFile    = "namespaces.yaml"
)

// Specificity of a destination: when several syncPolicies of an application
// match a cluster, all of them apply, less specific first — fleet
// destinations, then label selectors, then cluster names — and, at equal
// specificity, in the order they are written. A later policy overrides an
// earlier one: Helm values are deep-merged over the application's values in
// that order; patches accumulate in that order; images, replicas and the
// namespace are replaced (the last policy that sets one wins, per image and
// per workload). Two policies dividing the same workload on one cluster
// (replicaScheduling) are an error, since neither division would hold.
const (
	specificityFleet = iota
	specificitySelector
	specificityClusters
)

// Compile turns a loaded repo into one slice per cluster: the units each
// cluster runs, in dependency order, with their generated files. Problems
// in the inputs are returned as a fleet.ErrorList naming file and field;
// nothing is written.
func Compile(ctx context.Context, repo *fleet.Repo, opts CompileOptions) (*Output, error) {
	c := &compiler{
		ctx:    ctx,
		repo:   repo,
		opts:   opts,
		hasher: newTreeHasher(repo.Root),
		nsMemo: map[string]*unitContent{},
	}
	return c.run()
}

type compiler struct {
	ctx    context.Context
	repo   *fleet.Repo
	opts   CompileOptions
	errs   errorCollector
	warns  errorCollector
	hasher *treeHasher
	apps   []*appPlan
	charts []VendoredChart
	nsMemo map[string]*unitContent
	// fleetState: policies, identities and routes (fleetunits.go).
	fleetState *fleetUnitState
	// volcano: queues and GlobalJobs (volcano.go).
	volcano *volcanoState
}

// appPlan is what the compiler derives once per application and reuses for
// every cluster.
type appPlan struct {
	app  *fleet.Application
	kind UnitKind
	// srcDir is the source directory, repo-relative (a kustomization, a
	// manifests directory or a chart path).
	srcDir string
	// resources are the generated kustomization's resources, relative to a
	// unit directory.
	resources  []string
	chartRef   *ChartRef
	chartDir   string
	baseValues map[string]any
	baseVars   bool
	// policies in precedence order.
	policies []*policyPlan
	// inputs are the repo paths the unit's render reads besides its unit
	// directory; digest covers them.
	digest string
	memo   map[string]*unitContent
	broken bool
}

type policyPlan struct {
	index       int
	policy      *fleet.SyncPolicy
	specificity int
	clusters    map[string]bool
	values      map[string]any
	usesVars    bool
	shares      map[string]int64
}

// unitContent is a unit's generated files, namespace and hash; clusters
// whose unit would be identical share one.
type unitContent struct {
	files     []unitFile
	namespace string
	hash      string
}

type unitFile struct {
	name string
	data []byte
}

func (c *compiler) field(a *fleet.Application, field string, kind error, cluster, format string, args ...any) {
	c.errs.addf(a.Source.File, a.Line(field), field, kind, cluster, format, args...)
}

func (c *compiler) run() (*Output, error) {
	clusters, err := c.selectClusters()
	if err != nil {
		return nil, err
	}
	for _, a := range c.repo.Applications {
		c.apps = append(c.apps, c.planApp(a))
	}
	if !c.errs.empty() {
		return nil, c.errs.list()
	}
	if err := c.vendorCharts(); err != nil {
		return nil, err
	}
	if !c.opts.ValidateOnly {
		for _, p := range c.apps {
			if err := c.digestApp(p); err != nil {
				return nil, err
			}
		}
		if !c.errs.empty() {
			return nil, c.errs.list()
		}
	}
	out := &Output{Charts: c.charts}
	if len(c.opts.Clusters) > 0 {
		for _, cl := range clusters {
			out.Scope = append(out.Scope, cl.Metadata.Name)
		}
	}
	compiled, err := c.compileClusters(clusters)
	if err != nil {
		return nil, err
	}
	out.Clusters = compiled
	if !c.errs.empty() {
		return nil, c.errs.list()
	}
	out.Warnings = c.warns.list()
	return out, nil
}

// selectClusters returns the clusters to compile, sorted by name.
func (c *compiler) selectClusters() ([]*fleet.Cluster, error) {
	all := append([]*fleet.Cluster(nil), c.repo.Clusters...)
	sort.Slice(all, func(i, j int) bool { return all[i].Metadata.Name < all[j].Metadata.Name })
	if len(c.opts.Clusters) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range c.opts.Clusters {
		if c.repo.Cluster(n) == nil {
			return nil, fmt.Errorf("cluster %q: %w", n, ErrUnknownCluster)
		}
		want[n] = true
	}
	var out []*fleet.Cluster
	for _, cl := range all {
		if want[cl.Metadata.Name] {
			out = append(out, cl)
		}
	}
	return out, nil
}

// planApp derives everything about an application that does not depend on
// the cluster.
func (c *compiler) planApp(a *fleet.Application) *appPlan {
	p := &appPlan{app: a, memo: map[string]*unitContent{}}
	if strings.HasPrefix(a.Metadata.Name, ReservedPrefix) {
		c.field(a, "metadata.name", fleet.ErrInvalidValue, "", "the prefix %q is reserved for generated units", ReservedPrefix)
		p.broken = true
	}
	src := a.Spec.Source
	appDir := a.AppDir()
	var srcField string
	switch {
	case src.Kustomize != nil:
		p.kind, srcField = UnitKustomize, "spec.source.kustomize.path"
		p.srcDir = path.Join(appDir, src.Kustomize.Path)
	case src.Manifests != nil:
		p.kind, srcField = UnitManifests, "spec.source.manifests.path"
		p.srcDir = path.Join(appDir, src.Manifests.Path)
	case src.Helm != nil:
		p.kind = UnitHelm
		if src.Helm.Repo != "" {
			p.chartRef = &ChartRef{Repo: src.Helm.Repo, Chart: src.Helm.Chart, Version: src.Helm.Version}
		} else {
			srcField = "spec.source.helm.path"
			p.srcDir = path.Join(appDir, src.Helm.Path)
		}
		vals, err := decodeValues(src.Helm.Values)
		if err != nil {
			c.field(a, "spec.source.helm.values", fleet.ErrInvalidValue, "", "%v", err)
			p.broken = true
		}
		p.baseValues, p.baseVars = vals, valuesUseVars(vals)
		p.resources = []string{HelmOutputFile}
	default:
		c.field(a, "spec.source", fleet.ErrRequired, "", "one of kustomize, manifests or helm is required")
		return &appPlan{app: a, broken: true}
	}
	if srcField != "" && !c.checkSourceDir(p, srcField) {
		p.broken = true
	}
	for i := range a.Spec.SyncPolicies {
		if pp := c.planPolicy(p, i); pp != nil {
			p.policies = append(p.policies, pp)
		} else {
			p.broken = true
		}
	}
	sort.SliceStable(p.policies, func(i, j int) bool {
		return p.policies[i].specificity < p.policies[j].specificity
	})
	return p
}

// checkSourceDir checks the source directory and derives the resources of
// the generated kustomization.
func (c *compiler) checkSourceDir(p *appPlan, field string) bool {
	a := p.app
	if !inRepo(p.srcDir) {
		c.field(a, field, fleet.ErrInvalidValue, "", "%s: %v", p.srcDir, ErrOutsideRepo)
		return false
	}
	abs := filepath.Join(c.repo.Root, filepath.FromSlash(p.srcDir))
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		c.field(a, field, fleet.ErrDanglingReference, "", "directory %s does not exist", p.srcDir)
		return false
	}
	switch p.kind {
	case UnitKustomize:
		if !hasKustomization(abs) {
			c.field(a, field, fleet.ErrInvalidValue, "", "%s has no kustomization.yaml (use source.manifests for plain manifests)", p.srcDir)
			return false
		}
		p.resources = []string{relFromUnitDir(p.srcDir)}
	case UnitManifests:
		if hasKustomization(abs) {
			c.field(a, field, fleet.ErrInvalidValue, "", "%s has a kustomization.yaml (use source.kustomize)", p.srcDir)
			return false
		}
		files, err := manifestFiles(c.repo.Root, p.srcDir, path.Join(a.AppDir(), fleet.AppFile))
		if err != nil {
			c.field(a, field, fleet.ErrInvalidValue, "", "%v", err)
			return false
		}
		for _, f := range files {
			p.resources = append(p.resources, relFromUnitDir(f))
		}
	case UnitHelm:
		if _, err := os.Stat(filepath.Join(abs, "Chart.yaml")); err != nil {
			c.field(a, field, fleet.ErrInvalidValue, "", "%s has no Chart.yaml", p.srcDir)
			return false
		}
		p.chartDir = p.srcDir
	}
	return true
}

func hasKustomization(dir string) bool {
	for _, n := range kustomizationFiles {
		if fi, err := os.Stat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// manifestFiles lists the YAML and JSON files under dir, recursively,
// sorted by path, skipping hidden files and directories and the
// application's own app.yaml (when the source is the application
// directory).
func manifestFiles(root, dir, appFile string) ([]string, error) {
	var out []string
	base := filepath.Join(root, filepath.FromSlash(dir))
	err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != base && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			return nil
		}
		switch strings.ToLower(path.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); rel != appFile {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list manifests in %s: %w", dir, err)
	}
	sort.Strings(out)
	return out, nil
}

// unitDirDepth is how many directories a unit directory lies below the repo
// root: rendered/<bucket>/<cluster>/<unit>.
const unitDirDepth = 4

// relFromUnitDir is the path from any unit directory to a repo path.
func relFromUnitDir(p string) string {
	return strings.Repeat("../", unitDirDepth) + p
}

func (c *compiler) planPolicy(p *appPlan, i int) *policyPlan {
	a := p.app
	sp := &a.Spec.SyncPolicies[i]
	prefix := "spec.syncPolicies[" + strconv.Itoa(i) + "]"
	pp := &policyPlan{index: i, policy: sp, clusters: map[string]bool{}}
	d := sp.Destination
	switch {
	case len(d.Clusters) > 0:
		pp.specificity = specificityClusters
	case d.Selector != nil:
		pp.specificity = specificitySelector
	default:
		pp.specificity = specificityFleet
	}
	dest := c.repo.Resolve(d)
	for _, cl := range dest {
		pp.clusters[cl.Metadata.Name] = true
	}
	ok := true
	if ov := sp.Overrides; ov != nil {
		if ov.Values != nil {
			if p.kind != UnitHelm {
				c.field(a, prefix+".overrides.values", fleet.ErrInvalidValue, "", "values apply only to a helm source")
				ok = false
			} else if vals, err := decodeValues(ov.Values); err != nil {
				c.field(a, prefix+".overrides.values", fleet.ErrInvalidValue, "", "%v", err)
				ok = false
			} else {
				pp.values = vals
			}
		}
		pp.usesVars = valuesUseVars(pp.values) || usesClusterVars(ov.Namespace)
		for _, pt := range ov.Patches {
			pp.usesVars = pp.usesVars || usesClusterVars(pt.Patch)
			if t := pt.Target; t != nil {
				pp.usesVars = pp.usesVars || usesClusterVars(t.Group+t.Version+t.Kind+t.Name+t.Namespace+t.LabelSelector+t.AnnotationSelector)
			}
		}
		for _, im := range ov.Images {
			pp.usesVars = pp.usesVars || usesClusterVars(im.Name+im.NewName+im.NewTag+im.Digest)
		}
	}
	if rs := sp.ReplicaScheduling; rs != nil {
		if rs.ReplicaSchedulingType != "" && rs.ReplicaSchedulingType != fleet.ReplicaSchedulingDivided {
			c.field(a, prefix+".replicaScheduling.replicaSchedulingType", fleet.ErrInvalidValue, "", "only %q is supported", fleet.ReplicaSchedulingDivided)
			return nil
		}
		if rs.ReplicaDivisionPreference != "" && rs.ReplicaDivisionPreference != fleet.ReplicaDivisionWeighted {
			c.field(a, prefix+".replicaScheduling.replicaDivisionPreference", fleet.ErrInvalidValue, "", "only %q is supported", fleet.ReplicaDivisionWeighted)
			return nil
		}
		weight := map[string]int64{}
		for j, w := range rs.WeightPreference.StaticWeightList {
			for _, n := range w.TargetCluster.ClusterNames {
				if _, dup := weight[n]; dup {
					c.field(a, fmt.Sprintf("%s.replicaScheduling.weightPreference.staticWeightList[%d]", prefix, j), fleet.ErrDuplicate, "", "cluster %s has more than one weight", n)
					return nil
				}
				weight[n] = w.Weight
				if !pp.clusters[n] {
					c.warns.addf(a.Source.File, a.Source.Line, fmt.Sprintf("%s.replicaScheduling.weightPreference.staticWeightList[%d]", prefix, j), fleet.ErrNoMatch, "",
						"cluster %s is not a destination of this policy; its weight is ignored", n)
				}
			}
		}
		ws := make([]placement.Weight, 0, len(dest))
		for _, cl := range dest {
			ws = append(ws, placement.Weight{Cluster: cl.Metadata.Name, Weight: weight[cl.Metadata.Name]})
		}
		shares, err := placement.Divide(int64(rs.Replicas), ws)
		if err != nil {
			c.field(a, prefix+".replicaScheduling", fleet.ErrInvalidValue, "", "divide %d replicas of %s: %v", rs.Replicas, rs.Target.Name, err)
			return nil
		}
		pp.shares = make(map[string]int64, len(shares))
		for _, s := range shares {
			pp.shares[s.Cluster] = s.Replicas
		}
	}
	if !ok {
		return nil
	}
	return pp
}

// vendorCharts pins and vendors every chart-repo chart in one call.
func (c *compiler) vendorCharts() error {
	var refs []ChartRef
	seen := map[ChartRef]bool{}
	for _, p := range c.apps {
		if p.chartRef != nil && !seen[*p.chartRef] {
			seen[*p.chartRef] = true
			refs = append(refs, *p.chartRef)
		}
	}
	if len(refs) == 0 || c.opts.ValidateOnly {
		return nil
	}
	sort.Slice(refs, func(i, j int) bool {
		a, b := refs[i], refs[j]
		if a.Repo != b.Repo {
			return a.Repo < b.Repo
		}
		if a.Chart != b.Chart {
			return a.Chart < b.Chart
		}
		return a.Version < b.Version
	})
	if c.opts.Charts == nil {
		return errors.New("compile: applications use chart repositories but no chart vendor was given")
	}
	vendored, err := c.opts.Charts(c.ctx, c.repo.Root, refs)
	if err != nil {
		return fmt.Errorf("vendor charts: %w", err)
	}
	byRef := map[ChartRef]VendoredChart{}
	for _, v := range vendored {
		byRef[v.Ref] = v
	}
	for _, p := range c.apps {
		if p.chartRef == nil {
			continue
		}
		v, ok := byRef[*p.chartRef]
		if !ok || v.Path == "" {
			return fmt.Errorf("vendor charts: no vendored copy of %s %s from %s", p.chartRef.Chart, p.chartRef.Version, p.chartRef.Repo)
		}
		if !inRepo(v.Path) {
			return fmt.Errorf("vendor charts: %s: %w", v.Path, ErrOutsideRepo)
		}
		p.chartDir = v.Path
	}
	c.charts = append(c.charts, vendored...)
	sort.Slice(c.charts, func(i, j int) bool { return c.charts[i].Path < c.charts[j].Path })
	return nil
}

// digestApp hashes every repo path an application's units read besides
// their own directory: the application directory, the source (with what a
// kustomization references, transitively) and the chart. The
// application's app.yaml is left out: its effect on a cluster is in the
// generated files already, so editing one policy changes only the clusters
// whose output changes (unless a kustomization lists app.yaml itself).
func (c *compiler) digestApp(p *appPlan) error {
	if p.broken {
		return nil
	}
	appDir := p.app.AppDir()
	appFile := path.Join(appDir, fleet.AppFile)
	roots := []string{appDir}
	if p.srcDir != "" {
		roots = append(roots, p.srcDir)
	}
	if p.chartDir != "" {
		roots = append(roots, p.chartDir)
	}
	readsAppFile := false
	if p.kind == UnitKustomize {
		inputs, err := kustomizeInputs(c.repo.Root, p.srcDir)
		if err != nil {
			c.field(p.app, "spec.source.kustomize.path", fleet.ErrInvalidValue, "", "%v", err)
			return nil
		}
		for _, in := range inputs {
			readsAppFile = readsAppFile || in == appFile
		}
		roots = append(roots, inputs...)
	}
	roots = minimalRoots(roots)
	if readsAppFile {
		roots = append(roots, appFile)
	}
	d := sha256.New()
	for _, r := range roots {
		var sum string
		var err error
		if r == appDir {
			sum, err = c.hasher.hashDirExcept(r, fleet.AppFile)
		} else {
			sum, err = c.hasher.hashPath(r)
		}
		if err != nil {
			return fmt.Errorf("application %s: %w", p.app.Metadata.Name, err)
		}
		writeField(d, r)
		writeField(d, sum)
	}
	p.digest = hex.EncodeToString(d.Sum(nil))
	return nil
}

// compileClusters compiles every cluster, in name order. Drafting a
// cluster shares memoised units with the clusters before it, so it runs on
// this goroutine, in order; finishing a draft (dependency order, slice.yaml,
// the file list) is independent per cluster and runs on a bounded pool
// alongside, so both cores work. Results and errors are kept by index, so
// the output does not depend on scheduling.
func (c *compiler) compileClusters(clusters []*fleet.Cluster) ([]*ClusterOutput, error) {
	results := make([]*ClusterOutput, len(clusters))
	cycles := make([]error, len(clusters))
	drafts := make([]*clusterDraft, len(clusters))
	var mu sync.Mutex
	done := 0
	progress := func() {
		if c.opts.Progress == nil {
			return
		}
		mu.Lock()
		done++
		c.opts.Progress(done, len(clusters))
		mu.Unlock()
	}
	work := make(chan int, 256)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i], cycles[i] = drafts[i].finish()
				drafts[i] = nil
				progress()
			}
		}()
	}
	var err error
	for i, cl := range clusters {
		if err = c.ctx.Err(); err != nil {
			break
		}
		d := c.draftCluster(cl)
		if d == nil {
			progress()
			continue
		}
		drafts[i] = d
		work <- i
	}
	close(work)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	out := make([]*ClusterOutput, 0, len(clusters))
	for i, co := range results {
		if cycles[i] != nil {
			cl := clusters[i]
			c.errs.add(cl.Source.File, cl.Source.Line, "", fleet.ErrDependencyCycle, cl.Metadata.Name, cycles[i].Error())
			continue
		}
		if co != nil {
			out = append(out, co)
		}
	}
	return out, nil
}

// clusterDraft is a cluster's units, dependencies set, before ordering.
type clusterDraft struct {
	cluster  string
	units    []Unit
	contents map[string]*unitContent
}

// finish orders the draft's units and lays out its files. It touches no
// compiler state, so drafts finish concurrently.
func (d *clusterDraft) finish() (*ClusterOutput, error) {
	ordered, err := topoSort(d.units)
	if err != nil {
		return nil, err
	}
	s := &Slice{APIVersion: APIVersion, Kind: Kind, Cluster: d.cluster, Units: ordered}
	files := make([]File, 0, 1+2*len(ordered))
	files = append(files, File{Path: SlicePath(d.cluster), Data: marshalSlice(s)})
	for _, u := range ordered {
		for _, f := range d.contents[u.Name].files {
			files = append(files, File{Path: u.Path + "/" + f.name, Data: f.data})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return &ClusterOutput{Slice: s, Files: files}, nil
}

// draftCluster gathers one cluster's units; nil when it has errors
// (recorded in c.errs).
func (c *compiler) draftCluster(cl *fleet.Cluster) *clusterDraft {
	name := cl.Metadata.Name
	type pending struct {
		unit    Unit
		content *unitContent
		app     *fleet.Application
	}
	var units []pending
	nsContent := c.namespacesUnit(cl)
	if nsContent != nil {
		units = append(units, pending{
			unit: Unit{
				Name: UnitNamespaces, Kind: UnitManifests, Path: UnitDir(name, UnitNamespaces),
				Prune: true, Wait: true, Timeout: metav1.Duration{Duration: fleet.DefaultTimeout},
				Hash: nsContent.hash,
			},
			content: nsContent,
		})
	}
	present := map[string]bool{}
	failed := false
	fleetExtra, ok := c.fleetUnits(cl, nsContent != nil)
	failed = !ok
	for _, fu := range fleetExtra {
		units = append(units, pending{unit: fu.unit, content: fu.content})
	}
	volcanoExtra, vok := c.volcanoUnits(cl, append(appPrerequisites(fleetExtra), namespaceDeps(nsContent)...))
	failed = failed || !vok
	for _, vu := range volcanoExtra {
		units = append(units, pending{unit: vu.unit, content: vu.content})
	}
	for _, p := range c.apps {
		if p.broken {
			continue
		}
		var matched []*policyPlan
		for _, pp := range p.policies {
			if pp.clusters[name] {
				matched = append(matched, pp)
			}
		}
		if len(matched) == 0 {
			continue
		}
		content := c.appUnit(p, matched, cl)
		if content == nil {
			failed = true
			continue
		}
		a := p.app
		u := Unit{
			Name:       a.Metadata.Name,
			Kind:       p.kind,
			Path:       UnitDir(name, a.Metadata.Name),
			Prune:      a.PruneEnabled(),
			AllowEmpty: a.Spec.AllowEmpty,
			Wait:       a.WaitEnabled(),
			Timeout:    metav1.Duration{Duration: a.TimeoutOrDefault()},
			Namespace:  content.namespace,
			Hash:       content.hash,
		}
		if p.kind == UnitHelm {
			release := a.Spec.Source.Helm.ReleaseName
			if release == "" {
				release = a.Metadata.Name
			}
			u.Helm = &HelmRelease{Chart: p.chartDir, ReleaseName: release, Values: path.Join(u.Path, ValuesFile)}
		}
		present[a.Metadata.Name] = true
		units = append(units, pending{unit: u, content: content, app: a})
	}
	for i := range units {
		a := units[i].app
		if a == nil {
			continue
		}
		var deps []string
		if nsContent != nil {
			deps = append(deps, UnitNamespaces)
		}
		deps = append(deps, appPrerequisites(fleetExtra)...)
		for j, d := range a.Spec.DependsOn {
			if !present[d] {
				c.field(a, fmt.Sprintf("spec.dependsOn[%d]", j), fleet.ErrDanglingReference, name,
					"%s depends on %s, which is not deployed to the same cluster", a.Metadata.Name, d)
				failed = true
				continue
			}
			deps = append(deps, d)
		}
		sort.Strings(deps)
		units[i].unit.DependsOn = dedupeSorted(deps)
	}
	if failed {
		return nil
	}
	d := &clusterDraft{cluster: name, units: make([]Unit, len(units)), contents: make(map[string]*unitContent, len(units))}
	for i, u := range units {
		d.units[i] = u.unit
		d.contents[u.unit.Name] = u.content
	}
	return d
}

func dedupeSorted(s []string) []string {
	if len(s) < 2 {
		return s
	}
	out := s[:1]
	for _, v := range s[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

// appUnit returns the application's unit content on cluster cl, shared with
// every other cluster whose unit cannot differ: same matching policies, no
// cluster variables, same replica shares.
func (c *compiler) appUnit(p *appPlan, matched []*policyPlan, cl *fleet.Cluster) *unitContent {
	var key strings.Builder
	perCluster := p.baseVars
	for _, pp := range matched {
		key.WriteString(strconv.Itoa(pp.index))
		if pp.shares != nil {
			key.WriteByte('=')
			key.WriteString(strconv.FormatInt(pp.shares[cl.Metadata.Name], 10))
		}
		key.WriteByte(',')
		perCluster = perCluster || pp.usesVars
	}
	if perCluster {
		key.WriteString("@")
		key.WriteString(cl.Metadata.Name)
	}
	k := key.String()
	if u, ok := p.memo[k]; ok {
		return u
	}
	u := c.buildAppUnit(p, matched, cl)
	if !perCluster || u != nil {
		// A failure that does not depend on the cluster is reported once.
		p.memo[k] = u
	}
	return u
}

// buildAppUnit applies the matched policies, in precedence order, to the
// application for one cluster.
func (c *compiler) buildAppUnit(p *appPlan, matched []*policyPlan, cl *fleet.Cluster) *unitContent {
	a := p.app
	name := cl.Metadata.Name
	ok := true
	expand := func(s, field string) string {
		if !usesClusterVars(s) {
			return s
		}
		vars, err := fleet.ClusterVars(s)
		if err != nil {
			c.field(a, field, fleet.ErrInvalidValue, "", "%s", withoutClass(err, fleet.ErrInvalidValue))
			ok = false
			return s
		}
		for _, v := range vars {
			if _, has := cl.Metadata.Labels[v.Label]; v.Label != "" && !has {
				c.field(a, field, fleet.ErrInvalidValue, name, "${cluster.labels.%s}: the cluster has no label %q", v.Label, v.Label)
				ok = false
				return s
			}
		}
		out, err := fleet.ExpandClusterVars(s, cl)
		if err != nil {
			c.field(a, field, fleet.ErrInvalidValue, name, "%s", withoutClass(err, fleet.ErrInvalidValue))
			ok = false
		}
		return out
	}

	namespace := a.Spec.Namespace
	var patches []fleet.Patch
	images := map[string]fleet.Image{}
	replicas := map[string]int64{}
	dividedBy := map[string]int{}
	var values map[string]any
	if p.kind == UnitHelm {
		values = c.expandValues(p.baseValues, "spec.source.helm.values", expand)
	}
	for _, pp := range matched {
		prefix := "spec.syncPolicies[" + strconv.Itoa(pp.index) + "]"
		if ov := pp.policy.Overrides; ov != nil {
			if ov.Namespace != "" {
				namespace = expand(ov.Namespace, prefix+".overrides.namespace")
				if errs := validation.IsDNS1123Label(namespace); ok && len(errs) > 0 {
					c.field(a, prefix+".overrides.namespace", fleet.ErrInvalidValue, name, "%q: %s", namespace, strings.Join(errs, "; "))
					ok = false
				}
			}
			for j, pt := range ov.Patches {
				f := fmt.Sprintf("%s.overrides.patches[%d]", prefix, j)
				np := fleet.Patch{Patch: expand(pt.Patch, f+".patch")}
				if t := pt.Target; t != nil {
					np.Target = &fleet.PatchTarget{
						Group:              expand(t.Group, f+".target.group"),
						Version:            expand(t.Version, f+".target.version"),
						Kind:               expand(t.Kind, f+".target.kind"),
						Name:               expand(t.Name, f+".target.name"),
						Namespace:          expand(t.Namespace, f+".target.namespace"),
						LabelSelector:      expand(t.LabelSelector, f+".target.labelSelector"),
						AnnotationSelector: expand(t.AnnotationSelector, f+".target.annotationSelector"),
					}
				}
				patches = append(patches, np)
			}
			for j, im := range ov.Images {
				f := fmt.Sprintf("%s.overrides.images[%d]", prefix, j)
				ni := fleet.Image{
					Name:    expand(im.Name, f+".name"),
					NewName: expand(im.NewName, f+".newName"),
					NewTag:  expand(im.NewTag, f+".newTag"),
					Digest:  expand(im.Digest, f+".digest"),
				}
				images[ni.Name] = ni
			}
			for _, r := range ov.Replicas {
				replicas[r.Name] = int64(r.Count)
			}
			if pp.values != nil {
				values = mergeValues(values, c.expandValues(pp.values, prefix+".overrides.values", expand))
			}
		}
		if rs := pp.policy.ReplicaScheduling; rs != nil {
			target := rs.Target.Name
			if first, dup := dividedBy[target]; dup {
				c.field(a, prefix+".replicaScheduling.target", ErrConflict, name,
					"workload %s is also divided by spec.syncPolicies[%d]; one cluster can follow only one division", target, first)
				ok = false
			}
			dividedBy[target] = pp.index
			replicas[target] = pp.shares[name]
		}
	}
	if !ok {
		return nil
	}
	kust, err := marshalKustomization(namespace, p.resources, patches, images, replicas)
	if err != nil {
		c.field(a, "spec", fleet.ErrInvalidValue, name, "generate kustomization: %v", err)
		return nil
	}
	u := &unitContent{namespace: namespace, files: []unitFile{{name: KustomizationFile, data: kust}}}
	if p.kind == UnitHelm {
		vals, err := marshalValues(values)
		if err != nil {
			c.field(a, "spec.source.helm.values", fleet.ErrInvalidValue, name, "generate values: %v", err)
			return nil
		}
		u.files = append(u.files, unitFile{name: ValuesFile, data: vals})
	}
	u.hash = unitHash(u.files, p.digest)
	return u
}

// withoutClass drops the "<class>: " prefix fleet's errors carry, since the
// FieldError built from them names the class itself.
func withoutClass(err, class error) string {
	return strings.TrimPrefix(err.Error(), class.Error()+": ")
}

// expandValues expands cluster variables in every string of a values tree;
// a failing leaf is reported with its field path.
func (c *compiler) expandValues(v map[string]any, field string, expand func(s, field string) string) map[string]any {
	if v == nil {
		return nil
	}
	m, _ := expandTree(v, field, expand).(map[string]any)
	return m
}

// unitHash covers the unit directory's files and the digest of everything
// else the unit's render reads.
func unitHash(files []unitFile, inputs string) string {
	d := sha256.New()
	writeField(d, "flotilla-unit-v1")
	for _, f := range files {
		sum := sha256.Sum256(f.data)
		writeField(d, f.name)
		writeField(d, hex.EncodeToString(sum[:]))
	}
	writeField(d, inputs)
	return "sha256:" + hex.EncodeToString(d.Sum(nil))
}
