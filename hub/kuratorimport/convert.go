package kuratorimport

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// Result is the converted fleet repo content: files by slash-separated
// path relative to the repo root, and the warnings, sorted by file and line.
type Result struct {
	Files    map[string][]byte
	Warnings fleet.ErrorList
}

// Paths returns the result's file paths, sorted.
func (r *Result) Paths() []string {
	out := make([]string, 0, len(r.Files))
	for p := range r.Files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

type converter struct {
	res      *Result
	errs     fleet.ErrorList
	clusters map[string]*object // by kind ns/name
	fleets   map[string]*object // by ns/name
	names    map[*object]string // Flotilla names
	// members are each valid Fleet's member clusters.
	members map[*object][]*object
}

// Convert converts the Kurator documents in files (path → content, read
// in the given order) into Flotilla files. On any error it returns a
// fleet.ErrorList naming every problem's file, line and field, and no result.
func Convert(files map[string][]byte, order []string) (*Result, error) {
	c := &converter{res: &Result{Files: map[string][]byte{}}, clusters: map[string]*object{}, fleets: map[string]*object{}, names: map[*object]string{}, members: map[*object][]*object{}}
	var objs []*object
	seen := map[string]*object{}
	for _, f := range order {
		got, err := parseFile(f, files[f])
		if err != nil {
			var l fleet.ErrorList
			if !errors.As(err, &l) {
				return nil, err
			}
			c.errs = append(c.errs, l...)
			continue
		}
		for _, o := range got {
			if prev := seen[o.key()]; prev != nil {
				c.errs = append(c.errs, o.errorf("metadata.name", fleet.ErrDuplicate, "%s %s/%s is also defined at %s:%d", o.Kind, o.Meta.Namespace, o.Meta.Name, prev.File, prev.Line))
				continue
			}
			seen[o.key()] = o
			objs = append(objs, o)
		}
	}
	var clusters, fleets, apps []*object
	for _, o := range objs {
		switch o.Kind {
		case kindAttachedCluster, kindCluster:
			clusters = append(clusters, o)
			c.clusters[o.Kind+" "+o.Meta.Namespace+"/"+o.Meta.Name] = o
		case kindFleet:
			fleets = append(fleets, o)
			c.fleets[o.Meta.Namespace+"/"+o.Meta.Name] = o
		default:
			apps = append(apps, o)
		}
	}
	c.assignNames(clusters)
	c.assignNames(fleets)
	c.assignNames(apps)
	if len(c.errs) == 0 {
		for _, o := range clusters {
			c.cluster(o)
		}
		for _, o := range fleets {
			c.fleet(o)
		}
		for _, o := range apps {
			c.application(o)
		}
	}
	if len(c.errs) > 0 {
		sortErrors(c.errs)
		return nil, c.errs
	}
	sortErrors(c.res.Warnings)
	return c.res, nil
}

// assignNames gives each object its Flotilla name: its Kurator name, or
// <namespace>-<name> for every object whose name is used in more than one
// namespace (Flotilla names are global).
func (c *converter) assignNames(objs []*object) {
	namespaces := map[string]map[string]bool{}
	for _, o := range objs {
		if namespaces[o.Meta.Name] == nil {
			namespaces[o.Meta.Name] = map[string]bool{}
		}
		namespaces[o.Meta.Name][o.Meta.Namespace] = true
	}
	taken := map[string]*object{}
	for _, o := range objs {
		name := o.Meta.Name
		if len(namespaces[name]) > 1 {
			name = o.Meta.Namespace + "-" + name
		}
		if prev := taken[name]; prev != nil {
			c.errs = append(c.errs, o.errorf("metadata.name", fleet.ErrDuplicate, "becomes Flotilla name %q, as %s %s/%s does (%s:%d); rename one", name, prev.Kind, prev.Meta.Namespace, prev.Meta.Name, prev.File, prev.Line))
			continue
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			c.errs = append(c.errs, o.errorf("metadata.name", fleet.ErrInvalidValue, "Flotilla name %q: %s", name, strings.Join(errs, "; ")))
			continue
		}
		taken[name] = o
		c.names[o] = name
	}
}

func (c *converter) warn(o *object, field string, class error, format string, args ...any) {
	c.res.Warnings = append(c.res.Warnings, o.errorf(field, class, format, args...))
}

func (c *converter) fail(o *object, field string, class error, format string, args ...any) {
	c.errs = append(c.errs, o.errorf(field, class, format, args...))
}

func (c *converter) emit(o *object, file string, v any) {
	data, err := yaml.Marshal(v)
	if err != nil {
		c.fail(o, "", fleet.ErrInvalidValue, "encode %s: %v", file, err)
		return
	}
	hdr := fmt.Sprintf("# Imported by flotilla import kurator from %s:%d (%s %s/%s).\n", o.File, o.Line, o.Kind, o.Meta.Namespace, o.Meta.Name)
	c.res.Files[file] = append([]byte(hdr), data...)
}

func (c *converter) decodeSpec(o *object, out any) bool {
	if o.Spec == nil {
		return true
	}
	if err := o.Spec.Decode(out); err != nil {
		var fe *fleet.FieldError
		if errors.As(o.decodeError("spec", err), &fe) {
			c.errs = append(c.errs, fe)
		}
		return false
	}
	return true
}

func (c *converter) cluster(o *object) {
	var spec provisionedClusterSpec
	if o.Kind == kindCluster && !c.decodeSpec(o, &spec) {
		return
	}
	c.res.Warnings = append(c.res.Warnings, unmapped(o)...)
	name := c.names[o]
	c.emit(o, "clusters/"+name+".yaml", &fleet.Cluster{
		TypeMeta: fleet.TypeMeta{APIVersion: fleet.APIVersion, Kind: fleet.KindCluster},
		Metadata: fleet.ObjectMeta{Name: name, Labels: o.Meta.Labels, Annotations: o.Meta.Annotations},
		Spec:     fleet.ClusterSpec{KubernetesVersion: spec.Version},
	})
}

// member finds the cluster a Fleet lists, in the fleet's namespace; an
// empty kind matches either cluster kind. It returns nil and the problem
// when there is not exactly one.
func (c *converter) member(ns string, ref clusterRef) (*object, string) {
	var found []*object
	for _, k := range []string{kindAttachedCluster, kindCluster} {
		if ref.Kind != "" && ref.Kind != k {
			continue
		}
		if o := c.clusters[k+" "+ns+"/"+ref.Name]; o != nil {
			found = append(found, o)
		}
	}
	switch len(found) {
	case 1:
		return found[0], ""
	case 0:
		return nil, fmt.Sprintf("no %s %s/%s among the inputs; pass its file too", orAny(ref.Kind), ns, ref.Name)
	default:
		return nil, fmt.Sprintf("both an AttachedCluster and a Cluster are named %s/%s; set kind", ns, ref.Name)
	}
}

func (c *converter) fleetMembers(o *object) ([]*object, bool) {
	var spec fleetSpec
	if !c.decodeSpec(o, &spec) {
		return nil, false
	}
	var out []*object
	ok := true
	for i, ref := range spec.Clusters {
		field := "spec.clusters[" + strconv.Itoa(i) + "]"
		if ref.Kind != "" && ref.Kind != kindAttachedCluster && ref.Kind != kindCluster {
			c.fail(o, field+".kind", fleet.ErrInvalidValue, "%q is not AttachedCluster or Cluster", ref.Kind)
			ok = false
			continue
		}
		m, problem := c.member(o.Meta.Namespace, ref)
		if m == nil {
			c.fail(o, field+".name", fleet.ErrDanglingReference, "%s", problem)
			ok = false
			continue
		}
		out = append(out, m)
	}
	return out, ok
}

func orAny(kind string) string {
	if kind == "" {
		return "AttachedCluster or Cluster"
	}
	return kind
}

func (c *converter) fleet(o *object) {
	members, ok := c.fleetMembers(o)
	if !ok {
		return
	}
	c.members[o] = members
	c.res.Warnings = append(c.res.Warnings, unmapped(o)...)
	var names []string
	for _, m := range members {
		names = append(names, c.names[m])
	}
	sort.Strings(names)
	name := c.names[o]
	c.emit(o, "fleets/"+name+".yaml", &fleet.Fleet{
		TypeMeta: fleet.TypeMeta{APIVersion: fleet.APIVersion, Kind: fleet.KindFleet},
		Metadata: fleet.ObjectMeta{Name: name, Labels: o.Meta.Labels, Annotations: o.Meta.Annotations},
		Spec:     fleet.FleetSpec{Clusters: names},
	})
}

// duration parses a Flux duration field ("5m", "1m0s").
func (c *converter) duration(o *object, field, s string) *metav1.Duration {
	if s == "" {
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		c.fail(o, field, fleet.ErrInvalidValue, "%q is not a positive duration", s)
		return nil
	}
	return &metav1.Duration{Duration: d}
}

func sortErrors(l fleet.ErrorList) {
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].File != l[j].File {
			return l[i].File < l[j].File
		}
		return l[i].Line < l[j].Line
	})
}

// rawJSON encodes Helm values for a Flotilla RawExtension.
func rawJSON(v map[string]any) (*runtime.RawExtension, error) {
	if v == nil {
		return nil, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return &runtime.RawExtension{Raw: data}, nil
}

func allEqual[T any](xs []T) bool {
	for _, x := range xs[1:] {
		if !reflect.DeepEqual(x, xs[0]) {
			return false
		}
	}
	return true
}
