package fleet

import (
	"path"
	"slices"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/pkg/health"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// Defaults for Application fields left unset.
const (
	DefaultTimeout = 5 * time.Minute
	// AppsDir, ClustersDir, FleetsDir and JobsDir are the input directories
	// at the repo root.
	AppsDir     = "apps"
	ClustersDir = "clusters"
	FleetsDir   = "fleets"
	JobsDir     = "jobs"
	// AppFile is the application document inside apps/<name>/.
	AppFile = "app.yaml"
)

// repoIndex caches lookups and fleet membership so the compiler's per-cluster
// queries stay cheap at 10,000 clusters. Load builds it and the loaded Repo
// is read-only from then on; a Repo assembled by hand (or one whose slices
// grew or shrank after Load) has no usable index and is scanned instead.
type repoIndex struct {
	nClusters, nFleets, nApps int
	clusters                  map[string]*Cluster
	fleets                    map[string]*Fleet
	apps                      map[string]*Application
	members                   map[*Fleet][]*Cluster
	fleetsOf                  map[*Cluster][]*Fleet

	// selected caches what each label selector matches (the compiler
	// resolves the same destinations for every application).
	mu       sync.Mutex
	selected map[string][]*Cluster
}

func (r *Repo) buildIndex() {
	idx := &repoIndex{
		nClusters: len(r.Clusters),
		nFleets:   len(r.Fleets),
		nApps:     len(r.Applications),
		clusters:  make(map[string]*Cluster, len(r.Clusters)),
		fleets:    make(map[string]*Fleet, len(r.Fleets)),
		apps:      make(map[string]*Application, len(r.Applications)),
		members:   make(map[*Fleet][]*Cluster, len(r.Fleets)),
		selected:  map[string][]*Cluster{},
		fleetsOf:  make(map[*Cluster][]*Fleet, len(r.Clusters)),
	}
	for _, c := range r.Clusters {
		if _, dup := idx.clusters[c.Metadata.Name]; !dup {
			idx.clusters[c.Metadata.Name] = c
		}
	}
	for _, f := range r.Fleets {
		if _, dup := idx.fleets[f.Metadata.Name]; !dup {
			idx.fleets[f.Metadata.Name] = f
		}
	}
	for _, a := range r.Applications {
		if _, dup := idx.apps[a.Metadata.Name]; !dup {
			idx.apps[a.Metadata.Name] = a
		}
	}
	fleets := sortedFleets(r.Fleets)
	for _, f := range fleets {
		m := r.scanMembers(f, idx.clusters)
		idx.members[f] = m
		for _, c := range m {
			idx.fleetsOf[c] = append(idx.fleetsOf[c], f)
		}
	}
	r.index = idx
}

// fresh returns the index when it still describes r.
func (r *Repo) fresh() *repoIndex {
	idx := r.index
	if idx == nil || idx.nClusters != len(r.Clusters) || idx.nFleets != len(r.Fleets) || idx.nApps != len(r.Applications) {
		return nil
	}
	return idx
}

// Cluster returns the cluster with that name, or nil.
func (r *Repo) Cluster(name string) *Cluster {
	if idx := r.fresh(); idx != nil {
		return idx.clusters[name]
	}
	for _, c := range r.Clusters {
		if c.Metadata.Name == name {
			return c
		}
	}
	return nil
}

// Fleet returns the fleet with that name, or nil.
func (r *Repo) Fleet(name string) *Fleet {
	if idx := r.fresh(); idx != nil {
		return idx.fleets[name]
	}
	for _, f := range r.Fleets {
		if f.Metadata.Name == name {
			return f
		}
	}
	return nil
}

// Application returns the application with that name, or nil.
func (r *Repo) Application(name string) *Application {
	if idx := r.fresh(); idx != nil {
		return idx.apps[name]
	}
	for _, a := range r.Applications {
		if a.Metadata.Name == name {
			return a
		}
	}
	return nil
}

// Members returns the fleet's clusters — those named in spec.clusters plus
// those its selector matches — sorted by name, each once. Names of missing
// clusters are skipped (Load reports them).
func (r *Repo) Members(f *Fleet) []*Cluster {
	if f == nil {
		return nil
	}
	if idx := r.fresh(); idx != nil {
		if m, ok := idx.members[f]; ok {
			return append([]*Cluster(nil), m...)
		}
	}
	return r.scanMembers(f, nil)
}

func (r *Repo) scanMembers(f *Fleet, byName map[string]*Cluster) []*Cluster {
	return r.pick(f.Spec.Clusters, f.Spec.Selector, byName)
}

// Resolve returns the clusters a destination selects, sorted by name, each
// once: a fleet's members (only those its label selector matches when one
// is set too), the clusters a label selector matches, or the named
// clusters that exist. An invalid selector or a missing fleet selects
// nothing (Load reports those).
func (r *Repo) Resolve(d Destination) []*Cluster {
	var byName map[string]*Cluster
	if idx := r.fresh(); idx != nil {
		byName = idx.clusters
	}
	if d.Fleet == "" {
		if d.Selector == nil && len(d.Clusters) == 0 {
			return nil
		}
		return r.pick(d.Clusters, d.Selector, byName)
	}
	members := r.Members(r.Fleet(d.Fleet))
	if d.Selector == nil {
		return members
	}
	matched := map[*Cluster]bool{}
	for _, c := range r.matching(d.Selector) {
		matched[c] = true
	}
	var out []*Cluster
	for _, c := range members {
		if matched[c] {
			out = append(out, c)
		}
	}
	return out
}

// FleetsOf returns the fleets the cluster is a member of, sorted by name.
func (r *Repo) FleetsOf(c *Cluster) []*Fleet {
	if c == nil {
		return nil
	}
	if idx := r.fresh(); idx != nil {
		return append([]*Fleet(nil), idx.fleetsOf[c]...)
	}
	var out []*Fleet
	for _, f := range sortedFleets(r.Fleets) {
		for _, m := range r.scanMembers(f, nil) {
			if m == c {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// pick returns the named clusters and those the selector matches, sorted by
// name, each once. byName may be nil.
func (r *Repo) pick(names []string, sel *metav1.LabelSelector, byName map[string]*Cluster) []*Cluster {
	var out []*Cluster
	for _, n := range names {
		var c *Cluster
		if byName != nil {
			c = byName[n]
		} else {
			c = r.Cluster(n)
		}
		if c != nil {
			out = append(out, c)
		}
	}
	if sel != nil {
		out = append(out, r.matching(sel)...)
	}
	return uniqueSorted(out)
}

// matching returns the clusters a label selector matches; an invalid
// selector matches none.
func (r *Repo) matching(sel *metav1.LabelSelector) []*Cluster {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil
	}
	idx := r.fresh()
	key := s.String()
	if idx != nil {
		idx.mu.Lock()
		cached, ok := idx.selected[key]
		idx.mu.Unlock()
		if ok {
			return cached
		}
	}
	var out []*Cluster
	for _, c := range r.Clusters {
		if s.Matches(labels.Set(c.Metadata.Labels)) {
			out = append(out, c)
		}
	}
	if idx != nil {
		idx.mu.Lock()
		idx.selected[key] = out
		idx.mu.Unlock()
	}
	return out
}

func uniqueSorted(cs []*Cluster) []*Cluster {
	if len(cs) == 0 {
		return nil
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Metadata.Name < cs[j].Metadata.Name })
	out := cs[:1]
	for _, c := range cs[1:] {
		if c != out[len(out)-1] && c.Metadata.Name != out[len(out)-1].Metadata.Name {
			out = append(out, c)
		}
	}
	return out
}

func sortedFleets(fs []*Fleet) []*Fleet {
	out := append([]*Fleet(nil), fs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Metadata.Name < out[j].Metadata.Name })
	return out
}

// AppDir is the application's directory, relative to the repo root:
// apps/<name>.
func (a *Application) AppDir() string {
	return path.Join(AppsDir, a.Metadata.Name)
}

// PruneEnabled reports spec.prune, default true.
// SuspendedOn reports whether the application is suspended on a cluster
// its policies (in precedence order, the matching ones) select: the last
// policy that sets suspend decides, else spec.suspend.
func (a *Application) SuspendedOn(policies []*SyncPolicy) bool {
	s := a.Spec.Suspend
	for _, p := range policies {
		if p.Suspend != nil {
			s = *p.Suspend
		}
	}
	return s
}

func (a *Application) PruneEnabled() bool {
	return a.Spec.Prune == nil || *a.Spec.Prune
}

// WaitEnabled reports spec.wait, default true.
func (a *Application) WaitEnabled() bool {
	return a.Spec.Wait == nil || *a.Spec.Wait
}

// TimeoutOrDefault reports spec.timeout, default 5m.
func (a *Application) TimeoutOrDefault() time.Duration {
	if a.Spec.Timeout == nil || a.Spec.Timeout.Duration <= 0 {
		return DefaultTimeout
	}
	return a.Spec.Timeout.Duration
}

// FailFastEnabled reports spec.failFast, default true.
func (a *Application) FailFastEnabled() bool {
	return a.Spec.FailFast == nil || *a.Spec.FailFast
}

// HealthChecksOn are the health checks of the application on cluster c:
// its own, then its fleets' defaults (fleets by name) for the kinds it
// does not check itself; the first check for a kind wins.
func (r *Repo) HealthChecksOn(a *Application, c *Cluster) []CustomHealthCheck {
	out := slices.Clone(a.Spec.HealthChecks)
	seen := map[schema.GroupKind]bool{}
	for _, hc := range out {
		seen[hc.groupKind()] = true
	}
	for _, f := range r.FleetsOf(c) {
		for _, hc := range f.Spec.HealthChecks {
			if !seen[hc.groupKind()] {
				seen[hc.groupKind()] = true
				out = append(out, hc)
			}
		}
	}
	return out
}

// groupKind is what the check covers, as the agent decides it.
func (hc CustomHealthCheck) groupKind() schema.GroupKind {
	return health.GroupKind(slice.HealthCheck(hc))
}
