package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ReservedNamePrefix starts the unit names the hub generates (the fleet
// namespaces, Volcano queues); applications may not use it. It equals
// slice.ReservedPrefix.
const ReservedNamePrefix = "flotilla-"

// jobUnitPrefix is how the compiler names a GlobalJob's unit
// (slice.VolcanoJobPrefix); an application may not take that name.
const jobUnitPrefix = "job-"

// validator checks the loaded documents one by one and against each other.
type validator struct {
	r       *Repo
	results []*loaded
	docs    map[any]*document
	// valid holds the objects whose typed decode succeeded; only they are
	// checked further (a half-decoded object would only add noise).
	valid    map[any]bool
	errs     ErrorList
	warnings []*FieldError
	// broken names the objects, by kind, whose files failed to load: a
	// reference to one is not reported again as dangling.
	broken map[string]map[string]bool
}

func newValidator(r *Repo, results []*loaded) *validator {
	return &validator{r: r, results: results, docs: map[any]*document{}, valid: map[any]bool{}, broken: map[string]map[string]bool{}}
}

func (v *validator) run() {
	v.collect()
	v.r.buildIndex()
	for _, c := range v.r.Clusters {
		if v.valid[c] {
			v.cluster(c)
		}
	}
	for _, f := range v.r.Fleets {
		if v.valid[f] {
			v.fleet(f)
		}
	}
	v.namespaceSameness()
	for _, a := range v.r.Applications {
		if v.valid[a] {
			v.application(a)
		}
	}
	v.cycles()
	for _, j := range v.r.GlobalJobs {
		if v.valid[j] {
			v.globalJob(j)
			v.globalJobReferences(j)
		}
	}
	v.fleetExtensions()
	for _, res := range v.results {
		v.errs = append(v.errs, res.doc.errs...)
	}
	sortErrors(v.errs)
	sortErrors(v.warnings)
	v.r.Warnings = v.warnings
}

// collect files the decoded objects into the Repo, sorted by name; of two
// objects with one name the first file wins and the other is an error.
func (v *validator) collect() {
	type named struct {
		name string
		obj  any
		doc  *document
	}
	byKind := map[string][]named{}
	for _, res := range v.results {
		if res.obj == nil || !res.decoded {
			if v.broken[res.in.kind] == nil {
				v.broken[res.in.kind] = map[string]bool{}
			}
			v.broken[res.in.kind][res.in.name] = true
		}
		if res.obj == nil {
			continue
		}
		v.docs[res.obj] = res.doc
		if res.decoded {
			v.valid[res.obj] = true
		}
		byKind[res.in.kind] = append(byKind[res.in.kind], named{objectName(res.obj), res.obj, res.doc})
	}
	for kind, objs := range byKind {
		sort.SliceStable(objs, func(i, j int) bool {
			if objs[i].name != objs[j].name {
				return objs[i].name < objs[j].name
			}
			return objs[i].doc.file < objs[j].doc.file
		})
		for i, o := range objs {
			if i > 0 && objs[i-1].name == o.name {
				o.doc.errorf("metadata.name", ErrDuplicate, "%s %q is also defined in %s", kind, o.name, objs[i-1].doc.file)
				delete(v.valid, o.obj)
				objs[i] = objs[i-1] // so a third copy names the first file too
				continue
			}
			switch obj := o.obj.(type) {
			case *Cluster:
				v.r.Clusters = append(v.r.Clusters, obj)
			case *Fleet:
				v.r.Fleets = append(v.r.Fleets, obj)
			case *Application:
				v.r.Applications = append(v.r.Applications, obj)
			case *GlobalJob:
				v.r.GlobalJobs = append(v.r.GlobalJobs, obj)
			case *TrafficRoute:
				v.r.TrafficRoutes = append(v.r.TrafficRoutes, obj)
			case *FleetPolicy:
				v.r.FleetPolicies = append(v.r.FleetPolicies, obj)
			}
		}
	}
}

// missing reports a reference to an object that does not exist and whose
// absence is not already explained by its own file's errors.
func (v *validator) missing(kind, name string) bool {
	var found bool
	switch kind {
	case KindCluster:
		found = v.r.Cluster(name) != nil
	case KindFleet:
		found = v.r.Fleet(name) != nil
	case KindApplication:
		found = v.r.Application(name) != nil
	}
	return !found && !v.broken[kind][name]
}

func objectName(obj any) string {
	switch o := obj.(type) {
	case *Cluster:
		return o.Metadata.Name
	case *Fleet:
		return o.Metadata.Name
	case *Application:
		return o.Metadata.Name
	case *GlobalJob:
		return o.Metadata.Name
	case *TrafficRoute:
		return o.Metadata.Name
	case *FleetPolicy:
		return o.Metadata.Name
	}
	return ""
}

func (v *validator) warnf(d *document, field string, class error, format string, args ...any) {
	v.warnings = append(v.warnings, &FieldError{File: d.file, Line: d.line(field), Field: field, Kind: class, Detail: fmt.Sprintf(format, args...)})
}

// --- names, labels, selectors ---

// dnsLabel checks a name that becomes a directory, a namespace or an object
// name on the clusters.
func dnsLabel(d *document, field, name string) bool {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		d.errorf(field, ErrInvalidValue, "%q is not a valid name: %s", name, strings.Join(errs, "; "))
		return false
	}
	return true
}

func (v *validator) meta(d *document, m ObjectMeta) {
	dnsLabel(d, "metadata.name", m.Name)
	checkLabels(d, "metadata.labels", m.Labels)
	checkAnnotations(d, "metadata.annotations", m.Annotations)
}

func checkLabels(d *document, field string, ls map[string]string) {
	for _, k := range sortedKeys(ls) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			d.errorf(joinPath(field, k), ErrInvalidValue, "invalid label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(ls[k]); len(errs) > 0 {
			d.errorf(joinPath(field, k), ErrInvalidValue, "invalid label value %q: %s", ls[k], strings.Join(errs, "; "))
		}
	}
}

func checkAnnotations(d *document, field string, as map[string]string) {
	for _, k := range sortedKeys(as) {
		if errs := validation.IsQualifiedName(strings.ToLower(k)); len(errs) > 0 {
			d.errorf(joinPath(field, k), ErrInvalidValue, "invalid annotation key %q: %s", k, strings.Join(errs, "; "))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func checkSelector(d *document, field string, sel *metav1.LabelSelector) bool {
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		d.errorf(field, ErrInvalidValue, "invalid label selector: %v", err)
		return false
	}
	return true
}

func positiveDuration(d *document, field string, dur metav1.Duration) {
	if d.has(field) && dur.Duration <= 0 {
		d.errorf(field, ErrInvalidValue, "%s must be positive", dur.Duration)
	}
}

func nonNegativeResources(d *document, field string, rl map[string]resource.Quantity) {
	for _, k := range sortedKeys(rl) {
		if q := rl[k]; q.Sign() < 0 {
			d.errorf(joinPath(field, k), ErrInvalidValue, "%s must not be negative", q.String())
		}
	}
}

func resourceMap(rl corev1.ResourceList) map[string]resource.Quantity {
	m := make(map[string]resource.Quantity, len(rl))
	for k, q := range rl {
		m[string(k)] = q
	}
	return m
}

// --- Cluster ---

func (v *validator) cluster(c *Cluster) {
	d := v.docs[c]
	v.meta(d, c.Metadata)
	if kv := c.Spec.KubernetesVersion; kv != "" {
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(kv, "v")); err != nil {
			d.errorf("spec.kubernetesVersion", ErrInvalidValue, "%q is not a version like v1.36.3", kv)
		}
	}
	for i, gv := range c.Spec.APIVersions {
		if _, err := parseGroupVersion(gv); err != nil {
			d.errorf(indexPath("spec.apiVersions", i), ErrInvalidValue, "%q: %v", gv, err)
		}
	}
	nonNegativeResources(d, "spec.capacity", resourceMap(c.Spec.Capacity))
	for i, k := range c.Spec.StatusKeys {
		if strings.TrimSpace(k) == "" {
			d.errorf(indexPath("spec.statusKeys", i), ErrInvalidValue, "empty key")
		}
	}
}

func parseGroupVersion(gv string) (string, error) {
	group, version, found := strings.Cut(gv, "/")
	if !found {
		group, version = "", gv
	}
	if version == "" || strings.Contains(version, "/") {
		return "", errors.New("must be <group>/<version> or <version>")
	}
	if group != "" {
		if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
			return "", fmt.Errorf("invalid group: %s", strings.Join(errs, "; "))
		}
	}
	if errs := validation.IsDNS1123Label(version); len(errs) > 0 {
		return "", fmt.Errorf("invalid version: %s", strings.Join(errs, "; "))
	}
	return gv, nil
}

// --- Fleet ---

func (v *validator) fleet(f *Fleet) {
	d := v.docs[f]
	v.meta(d, f.Metadata)
	if len(f.Spec.Clusters) == 0 && f.Spec.Selector == nil {
		d.errorf("spec.clusters", ErrRequired, "a fleet needs clusters, a selector, or both")
	}
	v.clusterNames(d, "spec.clusters", f.Spec.Clusters)
	if f.Spec.Selector != nil && checkSelector(d, "spec.selector", f.Spec.Selector) {
		if len(v.r.pick(nil, f.Spec.Selector, nil)) == 0 {
			v.warnf(d, "spec.selector", ErrNoMatch, "the selector matches no cluster")
		}
	}
	seen := map[string]int{}
	for i, ns := range f.Spec.Namespaces {
		field := indexPath("spec.namespaces", i)
		if ns.Name == "" {
			d.errorf(field+".name", ErrRequired, "a namespace needs a name")
			continue
		}
		dnsLabel(d, field+".name", ns.Name)
		if j, dup := seen[ns.Name]; dup {
			d.errorf(field+".name", ErrDuplicate, "namespace %q is already declared at spec.namespaces[%d]", ns.Name, j)
		}
		seen[ns.Name] = i
		checkLabels(d, field+".labels", ns.Labels)
		checkAnnotations(d, field+".annotations", ns.Annotations)
	}
	if hc := f.Spec.HealthCheck; hc != nil {
		positiveDuration(d, "spec.healthCheck.interval", hc.Interval)
		if d.has("spec.healthCheck.failureThreshold") && hc.FailureThreshold < 1 {
			d.errorf("spec.healthCheck.failureThreshold", ErrInvalidValue, "%d must be at least 1", hc.FailureThreshold)
		}
	}
	members := map[string]bool{}
	for _, c := range v.r.Members(f) {
		members[c.Metadata.Name] = true
	}
	queues := map[string]int{}
	for i, q := range f.Spec.Queues {
		field := indexPath("spec.queues", i)
		if q.Name == "" {
			d.errorf(field+".name", ErrRequired, "a queue needs a name")
			continue
		}
		if errs := validation.IsDNS1123Subdomain(q.Name); len(errs) > 0 {
			d.errorf(field+".name", ErrInvalidValue, "%q is not a valid name: %s", q.Name, strings.Join(errs, "; "))
		}
		if j, dup := queues[q.Name]; dup {
			d.errorf(field+".name", ErrDuplicate, "queue %q is already declared at spec.queues[%d]", q.Name, j)
		}
		queues[q.Name] = i
		if d.has(field+".weight") && q.Weight < 1 {
			d.errorf(field+".weight", ErrInvalidValue, "%d must be at least 1", q.Weight)
		}
		nonNegativeResources(d, field+".capability", resourceMap(q.Capability))
		for _, name := range sortedKeys(q.ClusterCapability) {
			cf := field + ".clusterCapability." + name
			switch {
			case v.r.Cluster(name) == nil:
				if v.missing(KindCluster, name) {
					d.errorf(cf, ErrDanglingReference, "no cluster named %q", name)
				}
			case !members[name]:
				d.errorf(cf, ErrInvalidValue, "cluster %q is not a member of fleet %s", name, f.Metadata.Name)
			}
			nonNegativeResources(d, cf, resourceMap(q.ClusterCapability[name]))
		}
	}
}

// clusterNames checks a list of cluster references.
func (v *validator) clusterNames(d *document, field string, names []string) {
	seen := map[string]int{}
	for i, n := range names {
		f := indexPath(field, i)
		if j, dup := seen[n]; dup {
			d.errorf(f, ErrDuplicate, "cluster %q is already listed at %s", n, indexPath(field, j))
			continue
		}
		seen[n] = i
		if v.missing(KindCluster, n) {
			d.errorf(f, ErrDanglingReference, "no cluster named %q", n)
		}
	}
}

// namespaceSameness rejects two fleets that declare one namespace
// differently while sharing a member: the member could not have both.
func (v *validator) namespaceSameness() {
	type decl struct {
		fleet *Fleet
		index int
		spec  NamespaceSpec
	}
	reported := map[string]bool{}
	for _, c := range v.r.Clusters {
		byName := map[string]decl{}
		for _, f := range v.r.FleetsOf(c) {
			if !v.valid[f] {
				continue
			}
			for i, ns := range f.Spec.Namespaces {
				prev, ok := byName[ns.Name]
				if !ok {
					byName[ns.Name] = decl{f, i, ns}
					continue
				}
				if prev.fleet == f || sameNamespace(prev.spec, ns) {
					continue
				}
				key := prev.fleet.Metadata.Name + "\x00" + f.Metadata.Name + "\x00" + ns.Name
				if reported[key] {
					continue
				}
				reported[key] = true
				v.docs[f].errorf(indexPath("spec.namespaces", i), ErrInvalidValue,
					"namespace %q differs from its declaration in fleet %s (%s); both fleets include cluster %s",
					ns.Name, prev.fleet.Metadata.Name, prev.fleet.Source.File, c.Metadata.Name)
			}
		}
	}
}

func sameNamespace(a, b NamespaceSpec) bool {
	return a.Name == b.Name && sameMap(a.Labels, b.Labels) && sameMap(a.Annotations, b.Annotations)
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		if vb, ok := b[k]; !ok || va != vb {
			return false
		}
	}
	return true
}

// --- Application ---

func (v *validator) application(a *Application) {
	d := v.docs[a]
	v.meta(d, a.Metadata)
	if strings.HasPrefix(a.Metadata.Name, ReservedNamePrefix) {
		d.errorf("metadata.name", ErrInvalidValue, "names starting with %q are reserved for units the hub generates", ReservedNamePrefix)
	}
	if ns := a.Spec.Namespace; ns != "" {
		dnsLabel(d, "spec.namespace", ns)
	}
	v.appSource(d, a)
	v.dependsOn(d, a)
	if a.Spec.Timeout != nil {
		positiveDuration(d, "spec.timeout", *a.Spec.Timeout)
	}
	if len(a.Spec.SyncPolicies) == 0 {
		d.errorf("spec.syncPolicies", ErrRequired, "an application needs at least one destination")
	}
	names := map[string]int{}
	for i, sp := range a.Spec.SyncPolicies {
		field := indexPath("spec.syncPolicies", i)
		if sp.Name != "" {
			dnsLabel(d, field+".name", sp.Name)
			if j, dup := names[sp.Name]; dup {
				d.errorf(field+".name", ErrDuplicate, "sync policy %q is already declared at spec.syncPolicies[%d]", sp.Name, j)
			}
			names[sp.Name] = i
		}
		clusters, ok := v.destination(d, field+".destination", sp.Destination)
		if sp.Overrides != nil {
			v.overrides(d, field+".overrides", sp.Overrides, clusters)
		}
		if sp.ReplicaScheduling != nil {
			v.replicaScheduling(d, field+".replicaScheduling", sp.ReplicaScheduling, clusters, ok)
		}
	}
	v.replicaConflicts(d, a)
}

func (v *validator) appSource(d *document, a *Application) {
	src := a.Spec.Source
	set := 0
	for _, isSet := range []bool{src.Kustomize != nil, src.Manifests != nil, src.Helm != nil} {
		if isSet {
			set++
		}
	}
	switch {
	case set == 0:
		d.errorf("spec.source", ErrRequired, "set one of kustomize, manifests or helm")
		return
	case set > 1:
		d.errorf("spec.source", ErrInvalidValue, "set only one of kustomize, manifests or helm")
		return
	}
	switch {
	case src.Kustomize != nil:
		v.sourcePath(d, a, "spec.source.kustomize.path", src.Kustomize.Path, "kustomization.yaml", "kustomization.yml", "Kustomization")
	case src.Manifests != nil:
		v.sourcePath(d, a, "spec.source.manifests.path", src.Manifests.Path)
	case src.Helm != nil:
		v.helmSource(d, a, src.Helm)
	}
}

// sourcePath checks a path relative to the application's directory: it
// must exist, be a directory holding one of want (if given), and stay in
// the repo, symlinks included.
func (v *validator) sourcePath(d *document, a *Application, field, p string, want ...string) {
	if p == "" {
		d.errorf(field, ErrRequired, "a path relative to %s/", a.AppDir())
		return
	}
	if strings.HasPrefix(p, "/") || filepath.IsAbs(p) || strings.Contains(p, `\`) {
		d.errorf(field, ErrInvalidValue, "%q must be a slash-separated path relative to %s/", p, a.AppDir())
		return
	}
	rel := path.Join(a.AppDir(), p)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		d.errorf(field, ErrInvalidValue, "%q leaves the repo", p)
		return
	}
	if rel == "rendered" || strings.HasPrefix(rel, "rendered/") {
		d.errorf(field, ErrInvalidValue, "%q is inside rendered/, which the hub generates", p)
		return
	}
	full := filepath.Join(v.r.Root, filepath.FromSlash(rel))
	fi, err := os.Stat(full)
	if err != nil {
		d.errorf(field, ErrInvalidValue, "%s does not exist", rel)
		return
	}
	if !fi.IsDir() {
		d.errorf(field, ErrInvalidValue, "%s is not a directory", rel)
		return
	}
	if real, err := filepath.EvalSymlinks(full); err == nil {
		if rootReal, err := filepath.EvalSymlinks(v.r.Root); err == nil {
			if r, err := filepath.Rel(rootReal, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				d.errorf(field, ErrInvalidValue, "%s leads out of the repo through a symlink", rel)
				return
			}
		}
	}
	if len(want) == 0 {
		return
	}
	for _, w := range want {
		if _, err := os.Stat(filepath.Join(full, w)); err == nil {
			return
		}
	}
	d.errorf(field, ErrInvalidValue, "%s has no %s", rel, want[0])
}

// helmChartName is the chart names a chart repository's index can hold
// and that can become the directory charts/<chart>/ (as pkg/render requires).
var helmChartName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (v *validator) helmSource(d *document, a *Application, h *HelmSource) {
	const field = "spec.source.helm"
	switch {
	case h.Path != "":
		for _, f := range []struct{ name, value string }{{"repo", h.Repo}, {"chart", h.Chart}, {"version", h.Version}} {
			if f.value != "" {
				d.errorf(field+"."+f.name, ErrInvalidValue, "set either path or repo and chart, not both")
				return
			}
		}
		v.sourcePath(d, a, field+".path", h.Path, "Chart.yaml")
	case h.Repo == "" && h.Chart == "":
		d.errorf(field+".repo", ErrRequired, "set repo and chart, or path")
	default:
		if h.Repo == "" {
			d.errorf(field+".repo", ErrRequired, "chart %q needs the repo that serves it", h.Chart)
		} else if u, err := url.Parse(h.Repo); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			d.errorf(field+".repo", ErrInvalidValue, "not an http:// or https:// chart repository URL")
		} else if u.User != nil {
			// Never echo it: the URL holds a secret.
			d.errorf(field+".repo", ErrInvalidValue, "must not embed credentials")
		}
		if h.Chart == "" {
			d.errorf(field+".chart", ErrRequired, "the chart's name in the repo")
		} else if !helmChartName.MatchString(h.Chart) {
			d.errorf(field+".chart", ErrInvalidValue, "%q is not a chart name", h.Chart)
		}
		if h.Version != "" {
			if _, err := semver.NewConstraint(h.Version); err != nil {
				d.errorf(field+".version", ErrInvalidValue, "%q is not a version or semver range: %v", h.Version, err)
			}
		}
	}
	if rn := h.ReleaseName; rn != "" {
		// Helm's own limit: the release name ends up in labels and Secret names.
		if errs := validation.IsDNS1123Subdomain(rn); len(errs) > 0 || len(rn) > 53 {
			d.errorf(field+".releaseName", ErrInvalidValue, "%q must be a DNS-1123 subdomain of at most 53 characters", rn)
		}
	}
	checkValues(d, field+".values", h.Values)
}

// checkValues requires Helm values to be a mapping.
func checkValues(d *document, field string, raw *runtime.RawExtension) {
	if raw == nil || len(raw.Raw) == 0 {
		return
	}
	b := bytes.TrimSpace(raw.Raw)
	if len(b) > 0 && b[0] != '{' && !bytes.Equal(b, []byte("null")) {
		d.errorf(field, ErrInvalidValue, "Helm values must be a mapping")
	}
}

func (v *validator) dependsOn(d *document, a *Application) {
	seen := map[string]int{}
	for i, dep := range a.Spec.DependsOn {
		field := indexPath("spec.dependsOn", i)
		if j, dup := seen[dep]; dup {
			d.errorf(field, ErrDuplicate, "%q is already listed at spec.dependsOn[%d]", dep, j)
			continue
		}
		seen[dep] = i
		if dep != a.Metadata.Name && v.missing(KindApplication, dep) {
			d.errorf(field, ErrDanglingReference, "no application named %q", dep)
		}
	}
}

// cycles reports each dependsOn cycle once, named in order from its
// alphabetically first application, at that application's dependsOn entry.
func (v *validator) cycles() {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	reported := map[string]bool{}
	var visit func(name string)
	visit = func(name string) {
		color[name] = grey
		stack = append(stack, name)
		a := v.r.Application(name)
		for _, dep := range a.Spec.DependsOn {
			if v.r.Application(dep) == nil {
				continue
			}
			switch color[dep] {
			case white:
				visit(dep)
			case grey:
				start := len(stack) - 1
				for stack[start] != dep {
					start--
				}
				v.reportCycle(append([]string(nil), stack[start:]...), reported)
			}
		}
		stack = stack[:len(stack)-1]
		color[name] = black
	}
	for _, a := range v.r.Applications {
		if color[a.Metadata.Name] == white {
			visit(a.Metadata.Name)
		}
	}
}

func (v *validator) reportCycle(cycle []string, reported map[string]bool) {
	// Rotate to start at the smallest name, so the message is stable.
	min := 0
	for i, n := range cycle {
		if n < cycle[min] {
			min = i
		}
	}
	cycle = append(cycle[min:], cycle[:min]...)
	text := strings.Join(append(cycle, cycle[0]), " → ")
	if reported[text] {
		return
	}
	reported[text] = true
	first := v.r.Application(cycle[0])
	next := cycle[0]
	if len(cycle) > 1 {
		next = cycle[1]
	}
	idx := 0
	for i, dep := range first.Spec.DependsOn {
		if dep == next {
			idx = i
			break
		}
	}
	v.docs[first].errorf(indexPath("spec.dependsOn", idx), ErrDependencyCycle, "%s", text)
}

// destination checks one destination and returns the clusters it selects;
// ok is false when it is invalid.
func (v *validator) destination(d *document, field string, dest Destination) ([]*Cluster, bool) {
	set := 0
	if dest.Fleet != "" {
		set++
	}
	if dest.Selector != nil {
		set++
	}
	if len(dest.Clusters) > 0 {
		set++
	}
	switch {
	case set == 0:
		d.errorf(field, ErrRequired, "set one of fleet, selector or clusters")
		return nil, false
	case set > 1:
		d.errorf(field, ErrInvalidValue, "set only one of fleet, selector or clusters")
		return nil, false
	}
	switch {
	case dest.Fleet != "":
		f := v.r.Fleet(dest.Fleet)
		if f == nil {
			if v.missing(KindFleet, dest.Fleet) {
				d.errorf(field+".fleet", ErrDanglingReference, "no fleet named %q", dest.Fleet)
			}
			return nil, false
		}
		cs := v.r.Members(f)
		if len(cs) == 0 {
			v.warnf(d, field+".fleet", ErrNoMatch, "fleet %s has no member", dest.Fleet)
		}
		return cs, true
	case dest.Selector != nil:
		if !checkSelector(d, field+".selector", dest.Selector) {
			return nil, false
		}
		cs := v.r.Resolve(dest)
		if len(cs) == 0 {
			v.warnf(d, field+".selector", ErrNoMatch, "the selector matches no cluster")
		}
		return cs, true
	default:
		before := len(d.errs)
		v.clusterNames(d, field+".clusters", dest.Clusters)
		return v.r.Resolve(dest), len(d.errs) == before
	}
}

func (v *validator) overrides(d *document, field string, o *Overrides, clusters []*Cluster) {
	// Every string the compiler expands per cluster, with its field.
	type expandable struct{ field, value string }
	var strs []expandable
	if o.Namespace != "" {
		strs = append(strs, expandable{field + ".namespace", o.Namespace})
	}
	for i, p := range o.Patches {
		pf := indexPath(field+".patches", i)
		strs = append(strs, expandable{pf + ".patch", p.Patch})
		if t := p.Target; t != nil {
			for _, f := range []expandable{
				{pf + ".target.group", t.Group}, {pf + ".target.version", t.Version}, {pf + ".target.kind", t.Kind},
				{pf + ".target.name", t.Name}, {pf + ".target.namespace", t.Namespace},
				{pf + ".target.labelSelector", t.LabelSelector}, {pf + ".target.annotationSelector", t.AnnotationSelector},
			} {
				if f.value != "" {
					strs = append(strs, f)
				}
			}
		}
		checkPatch(d, pf, p)
	}
	images := map[string]int{}
	for i, img := range o.Images {
		f := indexPath(field+".images", i)
		if img.Name == "" {
			d.errorf(f+".name", ErrRequired, "the image name to replace")
		} else if j, dup := images[img.Name]; dup {
			d.errorf(f+".name", ErrDuplicate, "image %q is already overridden at %s", img.Name, indexPath(field+".images", j))
		} else {
			images[img.Name] = i
		}
		if img.NewName == "" && img.NewTag == "" && img.Digest == "" {
			d.errorf(f, ErrRequired, "set newName, newTag or digest")
		}
		for _, s := range []expandable{{f + ".newName", img.NewName}, {f + ".newTag", img.NewTag}, {f + ".digest", img.Digest}} {
			if s.value != "" {
				strs = append(strs, s)
			}
		}
	}
	replicas := map[string]int{}
	for i, r := range o.Replicas {
		f := indexPath(field+".replicas", i)
		if r.Name == "" {
			d.errorf(f+".name", ErrRequired, "the workload whose replicas to set")
		} else if j, dup := replicas[r.Name]; dup {
			d.errorf(f+".name", ErrDuplicate, "workload %q is already set at %s", r.Name, indexPath(field+".replicas", j))
		} else {
			replicas[r.Name] = i
		}
		if r.Count < 0 {
			d.errorf(f+".count", ErrInvalidValue, "%d must not be negative", r.Count)
		}
	}
	checkValues(d, field+".values", o.Values)
	if o.Values != nil && len(o.Values.Raw) > 0 {
		var tree any
		if json.Unmarshal(o.Values.Raw, &tree) == nil {
			walkStrings(tree, field+".values", func(f, s string) { strs = append(strs, expandable{f, s}) })
		}
	}
	for _, s := range strs {
		if _, err := ClusterVars(s.value); err != nil {
			d.errorf(s.field, ErrInvalidValue, "%s", strings.TrimPrefix(err.Error(), ErrInvalidValue.Error()+": "))
			continue
		}
		for _, c := range clusters {
			x, err := ExpandClusterVars(s.value, c)
			if err != nil {
				d.errorf(s.field, ErrInvalidValue, "%s", strings.TrimPrefix(err.Error(), ErrInvalidValue.Error()+": "))
				break
			}
			if x == s.value {
				continue // no variables: checked once, not per cluster
			}
			if s.field == field+".namespace" {
				if errs := validation.IsDNS1123Label(x); len(errs) > 0 {
					d.errorf(s.field, ErrInvalidValue, "%q on cluster %s is not a valid namespace: %s", x, c.Metadata.Name, strings.Join(errs, "; "))
					break
				}
			}
			if strings.HasSuffix(s.field, "Selector") {
				if _, err := labels.Parse(x); err != nil {
					d.errorf(s.field, ErrInvalidValue, "%q on cluster %s is not a valid selector: %v", x, c.Metadata.Name, err)
					break
				}
			}
		}
		if len(clusters) == 0 && s.field == field+".namespace" && !strings.Contains(s.value, clusterVarPrefix) {
			dnsLabel(d, s.field, s.value)
		}
	}
}

// walkStrings calls fn for every string leaf of a decoded JSON tree.
func walkStrings(v any, field string, fn func(field, s string)) {
	switch t := v.(type) {
	case string:
		fn(field, t)
	case map[string]any:
		for _, k := range sortedKeys(t) {
			walkStrings(t[k], joinPath(field, k), fn)
		}
	case []any:
		for i, e := range t {
			walkStrings(e, indexPath(field, i), fn)
		}
	}
}

var json6902Ops = map[string]bool{"add": true, "remove": true, "replace": true, "move": true, "copy": true, "test": true}

// checkPatch parses a patch: a list is a JSON6902 patch (which needs a
// target), a mapping a strategic-merge patch (which names its object unless
// a target does).
func checkPatch(d *document, field string, p Patch) {
	if strings.TrimSpace(p.Patch) == "" {
		d.errorf(field+".patch", ErrRequired, "the patch text")
		return
	}
	pd := &document{file: d.file}
	n := pd.parseOne([]byte(p.Patch))
	if n != nil {
		// Convert too, so an alias bomb inside the patch text is caught
		// here rather than by Kustomize.
		pd.toJSON(n, "")
	}
	if len(pd.errs) > 0 {
		e := pd.errs[0]
		where := ""
		if e.Line > 0 {
			where = fmt.Sprintf("line %d of the patch: ", e.Line)
		}
		d.errorf(field+".patch", ErrInvalidValue, "does not parse as YAML: %s%s", where, e.Detail)
		return
	}
	switch n.Kind {
	case yaml.SequenceNode:
		if p.Target == nil {
			d.errorf(field+".target", ErrRequired, "a JSON6902 patch (a list of operations) needs a target")
		}
		for i, op := range n.Content {
			op = deref(op)
			if op.Kind != yaml.MappingNode {
				d.errorf(field+".patch", ErrInvalidValue, "operation %d is not a mapping", i)
				return
			}
			var name, opPath string
			for _, kv := range pd.mappingPairs(op, "") {
				if v := deref(kv.value); v.Kind == yaml.ScalarNode {
					switch kv.key {
					case "op":
						name = v.Value
					case "path":
						opPath = v.Value
					}
				}
			}
			if !json6902Ops[name] {
				d.errorf(field+".patch", ErrInvalidValue, "operation %d: op %q is not one of add, remove, replace, move, copy, test", i, name)
				return
			}
			if !strings.HasPrefix(opPath, "/") && opPath != "" || !pd.hasKey(op, "path") {
				d.errorf(field+".patch", ErrInvalidValue, "operation %d: path must be a JSON pointer such as /spec/replicas", i)
				return
			}
		}
	case yaml.MappingNode:
		if p.Target == nil {
			var kind, name string
			for _, kv := range pd.mappingPairs(n, "") {
				switch v := deref(kv.value); kv.key {
				case "kind":
					kind = v.Value
				case "metadata":
					if v.Kind == yaml.MappingNode {
						for _, m := range pd.mappingPairs(v, "") {
							if m.key == "name" {
								name = deref(m.value).Value
							}
						}
					}
				}
			}
			if kind == "" || name == "" {
				d.errorf(field+".patch", ErrInvalidValue, "a strategic-merge patch without a target must name its kind and metadata.name")
			}
		}
	default:
		d.errorf(field+".patch", ErrInvalidValue, "a patch is a mapping (strategic merge) or a list of operations (JSON6902)")
	}
	// A selector with cluster variables is checked once expanded, per cluster.
	if t := p.Target; t != nil {
		if t.LabelSelector != "" && !strings.Contains(t.LabelSelector, clusterVarPrefix) {
			if _, err := labels.Parse(t.LabelSelector); err != nil {
				d.errorf(field+".target.labelSelector", ErrInvalidValue, "invalid label selector: %v", err)
			}
		}
		if t.AnnotationSelector != "" && !strings.Contains(t.AnnotationSelector, clusterVarPrefix) {
			if _, err := labels.Parse(t.AnnotationSelector); err != nil {
				d.errorf(field+".target.annotationSelector", ErrInvalidValue, "invalid annotation selector: %v", err)
			}
		}
	}
}

func (d *document) hasKey(n *yaml.Node, key string) bool {
	for _, kv := range d.mappingPairs(n, "") {
		if kv.key == key {
			return true
		}
	}
	return false
}

func (v *validator) replicaScheduling(d *document, field string, rs *ReplicaScheduling, clusters []*Cluster, destOK bool) {
	if t := rs.ReplicaSchedulingType; t != "" && t != ReplicaSchedulingDivided {
		d.errorf(field+".replicaSchedulingType", ErrInvalidValue, "%q is not %s", t, ReplicaSchedulingDivided)
	}
	if p := rs.ReplicaDivisionPreference; p != "" && p != ReplicaDivisionWeighted {
		d.errorf(field+".replicaDivisionPreference", ErrInvalidValue, "%q is not %s", p, ReplicaDivisionWeighted)
	}
	if rs.Target.Name == "" {
		d.errorf(field+".target.name", ErrRequired, "the workload whose replicas to divide")
	}
	if rs.Replicas < 0 {
		d.errorf(field+".replicas", ErrInvalidValue, "%d must not be negative", rs.Replicas)
	}
	v.weights(d, field+".weightPreference.staticWeightList", rs.WeightPreference.StaticWeightList, clusters, destOK && rs.Replicas > 0)
}

// weights checks a staticWeightList against the destination's clusters.
// needPositive requires a destination cluster with a positive weight, so
// the replicas can go somewhere.
func (v *validator) weights(d *document, field string, list []StaticClusterWeight, clusters []*Cluster, needPositive bool) {
	if len(list) == 0 {
		d.errorf(field, ErrRequired, "at least one weight")
		return
	}
	inDest := map[string]bool{}
	for _, c := range clusters {
		inDest[c.Metadata.Name] = true
	}
	seen := map[string]string{}
	positive, positiveInDest := false, false
	var sum int64
	for i, w := range list {
		f := indexPath(field, i)
		if w.Weight < 0 {
			d.errorf(f+".weight", ErrInvalidValue, "%d must not be negative", w.Weight)
		}
		for range w.TargetCluster.ClusterNames {
			if w.Weight > 0 && sum > math.MaxInt64-w.Weight {
				d.errorf(f+".weight", ErrInvalidValue, "the weights add up to more than %d", int64(math.MaxInt64))
				return
			}
			if w.Weight > 0 {
				sum += w.Weight
			}
		}
		if len(w.TargetCluster.ClusterNames) == 0 {
			d.errorf(f+".targetCluster.clusterNames", ErrRequired, "the clusters this weight applies to")
		}
		for j, name := range w.TargetCluster.ClusterNames {
			cf := indexPath(f+".targetCluster.clusterNames", j)
			if prev, dup := seen[name]; dup {
				d.errorf(cf, ErrDuplicate, "cluster %q already has a weight at %s", name, prev)
				continue
			}
			seen[name] = cf
			switch {
			case v.r.Cluster(name) == nil:
				if v.missing(KindCluster, name) {
					d.errorf(cf, ErrDanglingReference, "no cluster named %q", name)
				}
			case !inDest[name] && len(clusters) > 0:
				v.warnf(d, cf, ErrNoMatch, "cluster %s is not in the destination; its weight is unused", name)
			}
			if w.Weight > 0 {
				positive = true
				if inDest[name] {
					positiveInDest = true
				}
			}
		}
	}
	switch {
	case !positive:
		d.errorf(field, ErrInvalidValue, "at least one weight must be positive")
	case needPositive && len(clusters) > 0 && !positiveInDest:
		d.errorf(field, ErrInvalidValue, "no cluster of the destination has a positive weight")
	}
}

// replicaConflicts rejects a workload whose replicas two sync policies set
// on one cluster by division, or by division and an override: the result
// would depend on an order nobody wrote down.
func (v *validator) replicaConflicts(d *document, a *Application) {
	type claim struct {
		policy int
		field  string
	}
	divided := map[string]claim{}  // cluster \x00 kind/name
	overridden := map[string]int{} // cluster \x00 name
	for i, sp := range a.Spec.SyncPolicies {
		if sp.Overrides == nil || len(sp.Overrides.Replicas) == 0 {
			continue
		}
		for _, c := range v.r.Resolve(sp.Destination) {
			for _, r := range sp.Overrides.Replicas {
				overridden[c.Metadata.Name+"\x00"+r.Name] = i
			}
		}
	}
	for i, sp := range a.Spec.SyncPolicies {
		rs := sp.ReplicaScheduling
		if rs == nil || rs.Target.Name == "" {
			continue
		}
		field := indexPath("spec.syncPolicies", i) + ".replicaScheduling.target"
		kind := rs.Target.Kind
		if kind == "" {
			kind = "Deployment"
		}
		workload := kind + "/" + rs.Target.Name
		for _, c := range v.r.Resolve(sp.Destination) {
			key := c.Metadata.Name + "\x00" + workload
			if prev, dup := divided[key]; dup && prev.policy != i {
				d.errorf(field, ErrDuplicate, "%s on cluster %s is already divided by spec.syncPolicies[%d]", workload, c.Metadata.Name, prev.policy)
				break
			}
			divided[key] = claim{i, field}
			if j, ok := overridden[c.Metadata.Name+"\x00"+rs.Target.Name]; ok {
				d.errorf(field, ErrInvalidValue, "%s on cluster %s is both divided here and given replicas by spec.syncPolicies[%d].overrides.replicas", workload, c.Metadata.Name, j)
				break
			}
		}
	}
}

// --- GlobalJob ---

func (v *validator) globalJob(j *GlobalJob) {
	d := v.docs[j]
	v.meta(d, j.Metadata)
	if a := v.r.Application(jobUnitPrefix + j.Metadata.Name); a != nil {
		d.errorf("metadata.name", ErrDuplicate, "its unit %s%s would collide with application %s (%s)", jobUnitPrefix, j.Metadata.Name, a.Metadata.Name, a.Source.File)
	}
	if ns := j.Spec.Namespace; ns != "" {
		dnsLabel(d, "spec.namespace", ns)
	}
	p := j.Spec.Placement
	clusters, ok := v.destination(d, "spec.placement.destination", p.Destination)
	switch p.Type {
	case "":
		d.errorf("spec.placement.type", ErrRequired, "%s or %s", GlobalJobPlacementDivided, GlobalJobPlacementBestFit)
	case GlobalJobPlacementDivided:
		v.weights(d, "spec.placement.staticWeightList", p.StaticWeightList, clusters, ok)
	case GlobalJobPlacementBestFit:
		if len(p.StaticWeightList) > 0 {
			d.errorf("spec.placement.staticWeightList", ErrInvalidValue, "weights apply to %s placement only", GlobalJobPlacementDivided)
		}
	default:
		d.errorf("spec.placement.type", ErrInvalidValue, "%q is not %s or %s", p.Type, GlobalJobPlacementDivided, GlobalJobPlacementBestFit)
	}
	t := j.Spec.Template
	if len(t.Tasks) == 0 {
		d.errorf("spec.template.tasks", ErrRequired, "a job needs at least one task")
	}
	if q := t.Queue; q != "" {
		if errs := validation.IsDNS1123Subdomain(q); len(errs) > 0 {
			d.errorf("spec.template.queue", ErrInvalidValue, "%q is not a valid queue name: %s", q, strings.Join(errs, "; "))
		}
	}
	total := int64(0)
	names := map[string]int{}
	for i, task := range t.Tasks {
		f := indexPath("spec.template.tasks", i)
		if task.Name != "" {
			dnsLabel(d, f+".name", task.Name)
			if k, dup := names[task.Name]; dup {
				d.errorf(f+".name", ErrDuplicate, "task %q is already declared at spec.template.tasks[%d]", task.Name, k)
			}
			names[task.Name] = i
		}
		if task.Replicas <= 0 {
			d.errorf(f+".replicas", ErrInvalidValue, "%d must be positive", task.Replicas)
		}
		total += int64(task.Replicas)
		if m := task.MinAvailable; m != nil && (*m < 0 || *m > task.Replicas) {
			d.errorf(f+".minAvailable", ErrInvalidValue, "%d must be between 0 and the task's %d replicas", *m, task.Replicas)
		}
	}
	if m := t.MinAvailable; m < 0 || int64(m) > total {
		d.errorf("spec.template.minAvailable", ErrInvalidValue, "%d must be between 0 and the job's %d replicas", m, total)
	}
}
