package fleetrender

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/gitsource"
	"github.com/flotilla-gitops/flotilla/pkg/placement"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

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
	if strings.HasPrefix(a.Metadata.Name, slice.ReservedPrefix) {
		c.field(a, "metadata.name", fleet.ErrInvalidValue, "", "the prefix %q is reserved for generated units", slice.ReservedPrefix)
		p.broken = true
	}
	src := a.Spec.Source
	appDir := a.AppDir()
	if src.Git != nil {
		appDir = gitsource.VendorDir(a.Metadata.Name)
	}
	var srcField string
	switch {
	case src.Kustomize != nil:
		p.kind, srcField = slice.UnitKustomize, "spec.source.kustomize.path"
		p.srcDir = path.Join(appDir, src.Kustomize.Path)
	case src.Manifests != nil:
		p.kind, srcField = slice.UnitManifests, "spec.source.manifests.path"
		p.srcDir = path.Join(appDir, src.Manifests.Path)
	case src.Helm != nil:
		p.kind = slice.UnitHelm
		if src.Helm.Repo != "" {
			p.chartRef = &chartvendor.ChartRef{Repo: src.Helm.Repo, Chart: src.Helm.Chart, Version: src.Helm.Version}
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
		p.resources = []string{slice.HelmOutputFile}
	default:
		c.field(a, "spec.source", fleet.ErrRequired, "", "one of kustomize, manifests or helm is required")
		return &appPlan{app: a, broken: true}
	}
	if srcField != "" && src.Git != nil && c.unvendored[a.Metadata.Name] {
		// Validation alone: the source is not vendored yet, and render will.
		switch p.kind {
		case slice.UnitKustomize:
			p.resources = []string{relFromUnitDir(p.srcDir)}
		case slice.UnitHelm:
			p.chartDir = p.srcDir
		}
	} else if srcField != "" && !c.checkSourceDir(p, srcField) {
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
	case slice.UnitKustomize:
		// Without a kustomization file, pkg/render generates Flux's.
		p.resources = []string{relFromUnitDir(p.srcDir)}
	case slice.UnitManifests:
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
	case slice.UnitHelm:
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
			if p.kind != slice.UnitHelm {
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

// vendorSources vendors every application's Git source in one call, before
// any source directory is read. Validation fetches nothing: an application
// whose copy is not there yet is only marked unvendored.
func (c *compiler) vendorSources() error {
	var specs []gitsource.Spec
	for _, a := range c.repo.Applications {
		if g := a.Spec.Source.Git; g != nil {
			specs = append(specs, gitsource.Spec{
				App: a.Metadata.Name, URL: g.URL, Path: g.Path, File: a.Source.File, Line: a.Line("spec.source.git"),
				Ref: gitsource.Ref{Branch: g.Ref.Branch, Tag: g.Ref.Tag, Commit: g.Ref.Commit},
			})
		}
	}
	if c.opts.ValidateOnly {
		c.unvendored = map[string]bool{}
		for _, s := range specs {
			if fi, err := os.Stat(filepath.Join(c.repo.Root, filepath.FromSlash(gitsource.VendorDir(s.App)))); err != nil || !fi.IsDir() {
				c.unvendored[s.App] = true
			}
		}
		return nil
	}
	if c.opts.Sources == nil {
		if len(specs) == 0 {
			return nil
		}
		return errors.New("compile: applications use Git sources but no source vendor was given")
	}
	res, err := c.opts.Sources(c.ctx, c.repo.Root, specs)
	if err != nil {
		return fmt.Errorf("vendor Git sources: %w", err)
	}
	c.sources = res
	return nil
}

// vendorCharts pins and vendors every chart-repo chart in one call.
func (c *compiler) vendorCharts() error {
	var refs []chartvendor.ChartRef
	seen := map[chartvendor.ChartRef]bool{}
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
		if c.chartRefErrors(err) {
			return c.errs.list()
		}
		return fmt.Errorf("vendor charts: %w", err)
	}
	byRef := map[chartvendor.ChartRef]chartvendor.VendoredChart{}
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

// chartRefClasses are the classes a chart vendoring error is reported
// under, most specific first.
var chartRefClasses = []error{
	render.ErrChartAuth, render.ErrChartNotFound, render.ErrChartDigest,
	render.ErrTooLarge, render.ErrPathEscape, render.ErrChartRepo,
}

// chartRefErrors turns a failure to vendor one chart reference into an
// error at the field of every application that names it (file, line,
// field, as for any bad input), and reports whether it did.
func (c *compiler) chartRefErrors(err error) bool {
	var re *chartvendor.RefError
	var rerr *render.Error
	if !errors.As(err, &re) || !errors.As(re.Err, &rerr) || errors.Is(err, context.Canceled) {
		return false
	}
	var class error
	for _, k := range chartRefClasses {
		if errors.Is(err, k) {
			class = k
			break
		}
	}
	if class == nil {
		return false
	}
	detail := strings.TrimPrefix(rerr.Err.Error(), class.Error()+": ")
	found := false
	for _, p := range c.apps {
		if p.chartRef != nil && *p.chartRef == re.Ref {
			c.field(p.app, "spec.source.helm."+re.Field, class, "", "%s", detail)
			found = true
		}
	}
	return found
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
	if p.kind == slice.UnitKustomize {
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
	inputs := make([]slice.Input, len(roots))
	for i, r := range roots {
		inputs[i] = slice.Input{Path: r}
		if r == appDir {
			inputs[i].Except = fleet.AppFile
		}
	}
	digest, err := c.hasher.InputsDigest(inputs)
	if err != nil {
		return fmt.Errorf("application %s: %w", p.app.Metadata.Name, err)
	}
	p.inputs, p.digest = inputs, digest
	return nil
}
