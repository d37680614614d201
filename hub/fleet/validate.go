package fleet

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-gitops/flotilla/pkg/health"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
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
	for _, p := range v.r.Providers {
		if v.valid[p] {
			v.provider(p)
		}
	}
	for _, a := range v.r.Alerts {
		if v.valid[a] {
			v.alert(a)
		}
	}
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
			case *Provider:
				v.r.Providers = append(v.r.Providers, obj)
			case *Alert:
				v.r.Alerts = append(v.r.Alerts, obj)
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
	case *Provider:
		return o.Metadata.Name
	case *Alert:
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

// healthChecks checks custom health checks as the agent compiles them:
// apiVersion and current required, every expression valid CEL, one check
// per kind.
func healthChecks(d *document, field string, checks []CustomHealthCheck) {
	seen := map[schema.GroupKind]int{}
	for i, hc := range checks {
		at := indexPath(field, i)
		if hc.APIVersion == "" {
			d.errorf(at+".apiVersion", ErrRequired, "a health check names the apiVersion it checks")
		}
		if hc.Current == "" {
			d.errorf(at+".current", ErrRequired, "a health check needs the expression that says the object is healthy")
		}
		for _, f := range health.Fields(slice.HealthCheck(hc)) {
			if f.Value == "" {
				continue // reported as required
			}
			if err := health.CheckExpression(f.Value); err != nil {
				d.errorf(at+"."+f.Name, ErrInvalidValue, "the CEL expression does not compile: %v", err)
			}
		}
		if j, dup := seen[hc.groupKind()]; dup {
			d.errorf(at+".kind", ErrDuplicate, "%s %s is already checked at %s", hc.APIVersion, hc.Kind, indexPath(field, j))
		}
		seen[hc.groupKind()] = i
	}
}
