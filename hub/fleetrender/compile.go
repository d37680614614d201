package fleetrender

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/gitsource"
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// ChartVendor pins and vendors chart-repo charts into the repo and returns
// one VendoredChart per ref; chartvendor.VendorCharts unless a test or the
// caller supplies another.
type ChartVendor func(ctx context.Context, repoRoot string, refs []chartvendor.ChartRef) ([]chartvendor.VendoredChart, error)

// SourceVendor vendors the applications' Git sources into the repo
// (gitsource.Vendor with the command's options) and returns one Result per
// spec.
type SourceVendor func(ctx context.Context, repoRoot string, specs []gitsource.Spec) ([]gitsource.Result, error)

// Options tune Compile.
type Options struct {
	// Clusters limits the compile to the named clusters; empty means all.
	Clusters []string
	// Charts vendors chart-repo charts. Required when an application uses a
	// chart repository, unless ValidateOnly.
	Charts ChartVendor
	// Sources vendors Git sources. Required when an application has
	// spec.source.git, unless ValidateOnly.
	Sources SourceVendor
	// ValidateOnly checks everything that can fail without vendoring charts;
	// helm units of chart-repo charts get no chart path and their hashes
	// leave the chart out, so the Output must not be written.
	ValidateOnly bool
	// Progress, when set, is called after each cluster is compiled.
	Progress func(done, total int)
	// Capacity is the clusters' reported capacity for GlobalJob BestFit
	// placement (volcano.go); nil falls back to Cluster.spec.capacity.
	Capacity CapacitySource
	// Placed are the BestFit GlobalJobs already placed, which stay where
	// they are; Compile reads no rendered/ of its own.
	Placed PlacedJobs
	// Rollout holds back changed applications under a rollout
	// (rollout.go); nil releases every wave.
	Rollout *RolloutOptions
}

// PlacedJobs maps a GlobalJob's name to the clusters whose committed slice
// already runs it (ReadPlaced).
type PlacedJobs map[string][]string

// Output is a compiled fleet: every cluster's slice and generated files.
type Output struct {
	// Clusters are sorted by name.
	Clusters []*ClusterOutput
	// Scope is nil when every cluster was compiled; else the compiled
	// clusters' names, and Write leaves other clusters' directories alone.
	Scope []string
	// Charts are the vendored chart-repo charts, sorted by path.
	Charts []chartvendor.VendoredChart
	// Sources are the vendored Git sources, sorted by application.
	Sources []gitsource.Result
	// Warnings are problems that do not stop the render.
	Warnings fleet.ErrorList
	// Shared are generated files outside any cluster's directory — the
	// rollout snapshots and states — sorted by path.
	Shared []File
	// Rollouts are the applications under a rollout, by name.
	Rollouts []RolloutResult
	// Notes say what the compiler decided on the user's behalf (an
	// application's copy of a fleet namespace left out), one line each.
	Notes []string
	// KindScopes are the custom kinds the compiled units' CRDs define and
	// their scope (true: namespaced): what the hub knows of kinds beyond
	// the built-in ones when it renders without a cluster (plan).
	KindScopes map[schema.GroupKind]bool
}

// ClusterOutput is one cluster's slice and its files.
type ClusterOutput struct {
	Slice *slice.Slice
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
func Compile(ctx context.Context, repo *fleet.Repo, opts Options) (*Output, error) {
	c := &compiler{
		ctx:    ctx,
		repo:   repo,
		opts:   opts,
		hasher: slice.NewTreeHasher(repo.Root),
		nsMemo: map[string]*unitContent{},
		owned:  map[string]*unitContent{},
	}
	return c.run()
}

type compiler struct {
	ctx    context.Context
	repo   *fleet.Repo
	opts   Options
	errs   errorCollector
	warns  errorCollector
	hasher *slice.TreeHasher
	apps   []*appPlan
	charts []chartvendor.VendoredChart
	// sources are the vendored Git sources; unvendored the applications
	// whose copy is missing while ValidateOnly (their directory is not
	// checked).
	sources    []gitsource.Result
	unvendored map[string]bool
	nsMemo     map[string]*unitContent
	// owned memoises units rebuilt by the ownership rules (ownership.go).
	owned map[string]*unitContent
	// kindScopes: Output.KindScopes, found by renderContents.
	kindScopes map[schema.GroupKind]bool
	notes      noteCollector
	// fleetState: policies, identities and routes (fleetunits.go).
	fleetState *fleetUnitState
	// volcano: queues and GlobalJobs (volcano.go).
	volcano *volcanoState
	// rollouts are the applications under a rollout, once compiled;
	// lastCommitted caches the committed slice of the cluster being
	// drafted (rollout.go).
	rollouts      []RolloutResult
	lastCommitted struct {
		cluster string
		slice   *slice.Slice
	}
}

// appPlan is what the compiler derives once per application and reuses for
// every cluster.
type appPlan struct {
	app  *fleet.Application
	kind slice.UnitKind
	// srcDir is the source directory, repo-relative (a kustomization, a
	// manifests directory or a chart path).
	srcDir string
	// resources are the generated kustomization's resources, relative to a
	// unit directory.
	resources  []string
	chartRef   *chartvendor.ChartRef
	chartDir   string
	baseValues map[string]any
	baseVars   bool
	// policies in precedence order.
	policies []*policyPlan
	// inputs are the repo paths the unit's render reads besides its unit
	// directory; digest covers them.
	inputs []slice.Input
	digest string
	memo   map[string]*unitContent
	broken bool
	// rollout is set when the application has waves (rollout.go).
	rollout *rolloutPlan
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
	// kust and digest (application units) rebuild the unit without the
	// objects another unit owns (ownership.go).
	kust   *kustomizationArgs
	digest string
	// declared (the namespaces unit) are its namespaces and the fleets
	// that declared them.
	declared map[string]declaredNamespace
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
	if err := c.vendorSources(); err != nil {
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
		if err := c.planRollouts(); err != nil {
			return nil, err
		}
	}
	out := &Output{Charts: c.charts, Sources: c.sources}
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
	if out.Shared, err = c.rolloutFiles(compiled); err != nil {
		return nil, err
	}
	out.Rollouts = c.rollouts
	out.Warnings = c.warns.list()
	out.Notes = c.notes.list()
	out.KindScopes = c.kindScopes
	return out, nil
}
