package fleetrender

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// One owner per object. The compiler renders every distinct unit once
// (units shared by clusters share the render) through pkg/render, the code
// the agent applies with, so it knows each unit's objects. Within one
// cluster's slice:
//
//   - two units rendering the same object (group, kind, namespace, name)
//     is an error naming both units and the files they come from;
//   - except an application that ships a Namespace its cluster's fleets
//     declare: the namespaces unit owns it. The application's copy is left
//     out of the application's unit by a `$patch: delete` patch in the
//     unit's generated kustomization.yaml — so the agent, rendering the
//     unit itself, leaves it out too, and the unit's hash covers the
//     change — and its labels and annotations are merged into the
//     namespaces unit's Namespace; a key both set to different values is
//     an error naming both. Each merge is reported as a note.
//
// A unit that does not render here (a broken source, a chart not vendored
// under validate) is not checked: plan and the agent report its failure.
// Helm units render with Helm's default capabilities; an object whose
// identity depends on a cluster's capabilities is left to the agent's rule
// (agent/apply: an object labelled for another unit is not taken over).

// objectKey identifies an object within a cluster.
type objectKey struct {
	group, kind, namespace, name string
}

func (k objectKey) String() string {
	kind := k.kind
	if k.group != "" {
		kind += "." + k.group
	}
	if k.namespace == "" {
		return kind + " " + k.name
	}
	return kind + " " + k.namespace + "/" + k.name
}

// unitObjects is what one unit content renders to: its object keys in
// render order and the metadata of its Namespaces.
type unitObjects struct {
	keys       []objectKey
	namespaces map[string]namespaceMeta
	// invalid is the render error of a unit whose sources hold an object
	// no cluster can apply (render.ErrInvalidObject).
	invalid error
}

// renderContents renders every distinct unit content of the drafts once,
// concurrently, in a scratch directory inside the repo at the depth of
// rendered/<bucket>/<cluster>/<unit>, so that the generated files'
// relative references resolve as they will once written. Units that fail
// to render are left out of the map.
func (c *compiler) renderContents(drafts []*clusterDraft) (map[*unitContent]*unitObjects, error) {
	type job struct {
		content *unitContent
		unit    slice.Unit
	}
	var jobs []job
	// Units whose content hash (files and inputs) and render settings are
	// equal render equally: clusters whose units differ only in which
	// cluster they were expanded for share one render.
	byKey := map[string]int{}
	jobOf := map[*unitContent]int{}
	for _, d := range drafts {
		if d == nil {
			continue
		}
		for _, u := range d.units {
			ct := d.contents[u.Name]
			if _, seen := jobOf[ct]; seen || (u.Helm != nil && u.Helm.Chart == "") {
				continue
			}
			key := renderKey(u)
			i, seen := byKey[key]
			if !seen {
				i = len(jobs)
				byKey[key] = i
				jobs = append(jobs, job{content: ct, unit: u})
			}
			jobOf[ct] = i
		}
	}
	out := make(map[*unitContent]*unitObjects, len(jobOf))
	if len(jobs) == 0 {
		return out, nil
	}
	scratch, err := os.MkdirTemp(c.repo.Root, ".flotilla-objects-")
	if err != nil {
		return nil, fmt.Errorf("render units for the ownership check: %w", err)
	}
	defer os.RemoveAll(scratch)
	top := filepath.Base(scratch)
	for i := range jobs {
		j := &jobs[i]
		j.unit.Path = path.Join(top, "u", "u", strconv.Itoa(i))
		if j.unit.Helm != nil {
			h := *j.unit.Helm
			h.Values = path.Join(j.unit.Path, slice.ValuesFile)
			j.unit.Helm = &h
		}
		dir := filepath.Join(c.repo.Root, filepath.FromSlash(j.unit.Path))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("render units for the ownership check: %w", err)
		}
		for _, f := range j.content.files {
			if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
				return nil, fmt.Errorf("render units for the ownership check: %w", err)
			}
		}
	}
	results := make([]*unitObjects, len(jobs))
	unknown := make([][]string, len(jobs))
	scopes := make([]map[schema.GroupKind]bool, len(jobs))
	renderAll := func(which []int, opts render.Options) {
		next := make(chan int)
		var wg sync.WaitGroup
		for range min(runtime.GOMAXPROCS(0), len(which)) {
			wg.Go(func() {
				for i := range next {
					results[i], unknown[i], scopes[i] = renderObjects(c.ctx, c.repo.Root, jobs[i].unit, opts)
				}
			})
		}
		for _, i := range which {
			if c.ctx.Err() != nil {
				break
			}
			next <- i
		}
		close(next)
		wg.Wait()
	}
	all := make([]int, len(jobs))
	for i := range jobs {
		all[i] = i
	}
	renderAll(all, render.Options{})
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	// A custom kind's scope comes from its CRD, which may be another
	// unit's (a CRDs chart an application depends on): units that met
	// kinds of unknown scope render again knowing every unit's CRDs, so
	// that their objects are keyed by the namespace the cluster holds them
	// in.
	c.kindScopes = map[schema.GroupKind]bool{}
	for _, m := range scopes {
		maps.Copy(c.kindScopes, m)
	}
	var again []int
	for i, kinds := range unknown {
		for _, k := range kinds {
			if _, ok := c.kindScopes[schema.ParseGroupKind(k)]; ok {
				again = append(again, i)
				break
			}
		}
	}
	if len(again) > 0 {
		renderAll(again, render.Options{Capabilities: render.Capabilities{Namespaced: c.kindScopes}})
		if err := c.ctx.Err(); err != nil {
			return nil, err
		}
	}
	for ct, i := range jobOf {
		if results[i] != nil {
			out[ct] = results[i]
		}
	}
	return out, nil
}

// renderKey is what a unit's render depends on besides its content hash.
func renderKey(u slice.Unit) string {
	k := string(u.Kind) + "\x00" + u.Hash + "\x00" + u.Namespace
	if u.Helm != nil {
		k += "\x00" + u.Helm.Chart + "\x00" + u.Helm.ReleaseName
	}
	return k
}

// mergedValue is a label or annotation value an application's Namespace
// adds, and which application added it.
type mergedValue struct {
	value string
	app   *fleet.Application
}

// resolveOwnership applies the ownership rules to one cluster's draft,
// replacing the contents (and hashes) of the units they change. It reports
// false when the cluster has errors (recorded in c.errs).
func (c *compiler) resolveOwnership(d *clusterDraft, objects map[*unitContent]*unitObjects) bool {
	var declared map[string]declaredNamespace
	if ns := d.contents[slice.UnitNamespaces]; ns != nil {
		declared = ns.declared
	}
	owners := map[objectKey]string{}
	excluded := map[string][]string{}
	// Per namespace, per key: the value an application adds.
	labels := map[string]map[string]mergedValue{}
	annotations := map[string]map[string]mergedValue{}
	ok := true
	for _, u := range d.units {
		uo := objects[d.contents[u.Name]]
		if uo == nil {
			continue
		}
		if uo.invalid != nil {
			file, line, field := d.cl.Source.File, d.cl.Source.Line, ""
			if app := d.apps[u.Name]; app != nil {
				file, line, field = app.Source.File, app.Line("spec.source"), "spec.source"
			}
			c.errs.add(file, line, field, fleet.ErrInvalidValue, d.cluster, uo.invalid.Error())
			ok = false
			continue
		}
		for _, k := range uo.keys {
			app := d.apps[u.Name]
			if decl, isDeclared := declared[k.name]; isDeclared && app != nil && k.group == "" && k.kind == "Namespace" {
				meta := uo.namespaces[k.name]
				okL := c.mergeNamespaceMeta(d, app, decl, "label", decl.spec.Labels, meta.labels, labels, k.name)
				okA := c.mergeNamespaceMeta(d, app, decl, "annotation", decl.spec.Annotations, meta.annotations, annotations, k.name)
				ok = ok && okL && okA
				excluded[u.Name] = append(excluded[u.Name], k.name)
				c.notes.add(fmt.Sprintf("%s: application %s ships Namespace %s, which fleet %s declares (%s): the %s unit owns it; "+
					"the application's copy is left out of its unit and its labels and annotations are merged",
					app.Source.File, app.Metadata.Name, k.name, decl.fleet.Metadata.Name, decl.fleet.Source.File, slice.UnitNamespaces), d.cluster)
				continue
			}
			if strings.HasSuffix(k.name, render.ClusterHash) {
				// Generated from SOPS data: its real name hashes the
				// plaintext, known on the cluster only.
				continue
			}
			first, dup := owners[k]
			if !dup {
				owners[k] = u.Name
				continue
			}
			ok = false
			file, line := d.cl.Source.File, d.cl.Source.Line
			field := ""
			if app := d.apps[u.Name]; app != nil {
				file, line, field = app.Source.File, app.Line("spec.source"), "spec.source"
			} else if app := d.apps[first]; app != nil {
				file, line, field = app.Source.File, app.Line("spec.source"), "spec.source"
			}
			c.errs.addf(file, line, field, ErrConflict, d.cluster,
				"%s is rendered by unit %s (%s) and by unit %s (%s); an object must belong to one unit",
				k, first, c.unitSource(d, first, k), u.Name, c.unitSource(d, u.Name, k))
		}
	}
	if !ok {
		return false
	}
	for name, nss := range excluded {
		d.setContent(name, c.withoutNamespaces(d.contents[name], nss))
	}
	if len(excluded) > 0 {
		merged := map[string]namespaceMeta{}
		for ns := range declared {
			m := namespaceMeta{labels: values(labels[ns]), annotations: values(annotations[ns])}
			if m.labels != nil || m.annotations != nil {
				merged[ns] = m
			}
		}
		if len(merged) > 0 {
			ct, err := c.mergedNamespaces(d.contents[slice.UnitNamespaces], merged)
			if err != nil {
				c.errs.addf(d.cl.Source.File, d.cl.Source.Line, "", fleet.ErrInvalidValue, d.cluster, "generate namespaces: %v", err)
				return false
			}
			d.setContent(slice.UnitNamespaces, ct)
		}
	}
	return true
}

// mergeNamespaceMeta records the labels (or annotations) an application's
// copy of a declared namespace adds, and reports a key that the fleet or
// another application sets to a different value.
func (c *compiler) mergeNamespaceMeta(d *clusterDraft, app *fleet.Application, decl declaredNamespace, what string, fleetSet, appSet map[string]string, into map[string]map[string]mergedValue, ns string) bool {
	ok := true
	for _, key := range sortedKeys(appSet) {
		v := appSet[key]
		if fv, set := fleetSet[key]; set {
			if fv != v {
				c.field(app, "spec.source", ErrConflict, d.cluster,
					"Namespace %s: the application sets %s %s=%q, fleet %s (%s) declares %q",
					ns, what, key, v, decl.fleet.Metadata.Name, decl.fleet.Source.File, fv)
				ok = false
			}
			continue
		}
		m := into[ns]
		if m == nil {
			m = map[string]mergedValue{}
			into[ns] = m
		}
		if prev, set := m[key]; set && prev.value != v {
			c.field(app, "spec.source", ErrConflict, d.cluster,
				"Namespace %s: the application sets %s %s=%q, application %s (%s) sets %q",
				ns, what, key, v, prev.app.Metadata.Name, prev.app.Source.File, prev.value)
			ok = false
			continue
		}
		m[key] = mergedValue{value: v, app: app}
	}
	return ok
}

func values(m map[string]mergedValue) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.value
	}
	return out
}

// setContent replaces a unit's content and hash.
func (d *clusterDraft) setContent(name string, ct *unitContent) {
	d.contents[name] = ct
	for i := range d.units {
		if d.units[i].Name == name {
			d.units[i].Hash = ct.hash
		}
	}
}

// renderObjects renders one unit for the ownership check: its object keys
// and namespaces, the kinds whose scope the render did not know, and the
// scopes its CRDs define. A unit that fails to render for another reason
// than invalid objects has no result (the agent and plan report it).
func renderObjects(ctx context.Context, root string, u slice.Unit, opts render.Options) (*unitObjects, []string, map[schema.GroupKind]bool) {
	res, err := render.Unit(ctx, root, u, opts)
	if errors.Is(err, render.ErrInvalidObject) {
		// The sources themselves are wrong (an object without a name, a
		// generateName, a duplicate): no cluster could apply it, so the
		// hub says so now.
		return &unitObjects{invalid: err}, nil, nil
	}
	if err != nil {
		return nil, nil, nil
	}
	uo := &unitObjects{keys: make([]objectKey, len(res.Objects))}
	scopes := map[schema.GroupKind]bool{}
	for k, o := range res.Objects {
		gvk := o.GroupVersionKind()
		uo.keys[k] = objectKey{group: gvk.Group, kind: gvk.Kind, namespace: o.GetNamespace(), name: o.GetName()}
		if gvk.Group == "" && gvk.Kind == "Namespace" {
			if uo.namespaces == nil {
				uo.namespaces = map[string]namespaceMeta{}
			}
			uo.namespaces[o.GetName()] = namespaceMeta{labels: o.GetLabels(), annotations: o.GetAnnotations()}
		}
		if gk, namespaced, ok := render.CRDScope(o); ok {
			scopes[gk] = namespaced
		}
	}
	return uo, res.UnknownScope, scopes
}

// withoutNamespaces is an application unit's content with a `$patch:
// delete` patch per named Namespace, shared by the clusters that leave out
// the same namespaces.
func (c *compiler) withoutNamespaces(ct *unitContent, names []string) *unitContent {
	names = sortedCopy(names)
	key := fmt.Sprintf("drop %p %s", ct, strings.Join(names, ","))
	if u, ok := c.owned[key]; ok {
		return u
	}
	args := *ct.kust
	args.patches = append([]fleet.Patch(nil), ct.kust.patches...)
	for _, n := range names {
		args.patches = append(args.patches, fleet.Patch{Patch: "$patch: delete\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + slice.QuoteScalar(n) + "\n"})
	}
	kust, err := args.marshal()
	if err != nil {
		// The arguments marshalled before; a patch of plain strings cannot fail.
		panic(fmt.Sprintf("generate kustomization: %v", err))
	}
	u := &unitContent{namespace: ct.namespace, kust: &args, digest: ct.digest}
	for _, f := range ct.files {
		if f.name == KustomizationFile {
			f.data = kust
		}
		u.files = append(u.files, f)
	}
	u.hash = unitHash(u.files, ct.digest)
	c.owned[key] = u
	return u
}

// mergedNamespaces is the namespaces unit with applications' labels and
// annotations merged, shared by clusters with the same merge.
func (c *compiler) mergedNamespaces(ct *unitContent, merged map[string]namespaceMeta) (*unitContent, error) {
	var key strings.Builder
	fmt.Fprintf(&key, "ns %p", ct)
	for _, ns := range sortedKeys(merged) {
		m := merged[ns]
		fmt.Fprintf(&key, "|%s", ns)
		for _, k := range sortedKeys(m.labels) {
			fmt.Fprintf(&key, " l%q=%q", k, m.labels[k])
		}
		for _, k := range sortedKeys(m.annotations) {
			fmt.Fprintf(&key, " a%q=%q", k, m.annotations[k])
		}
	}
	if u, ok := c.owned[key.String()]; ok {
		return u, nil
	}
	u, err := namespacesContent(ct.declared, merged)
	if err != nil {
		return nil, err
	}
	c.owned[key.String()] = u
	return u, nil
}

// unitSource names the file a unit of d comes from, for messages.
func (c *compiler) unitSource(d *clusterDraft, unit string, k objectKey) string {
	if app := d.apps[unit]; app != nil {
		return app.Source.File
	}
	switch {
	case unit == slice.UnitNamespaces:
		if decl, ok := d.contents[unit].declared[k.name]; ok && k.kind == "Namespace" {
			return decl.fleet.Source.File
		}
		return "fleets/"
	case unit == slice.UnitPolicies:
		return "policies/"
	case unit == slice.UnitRoutes:
		return "routes/"
	case unit == slice.UnitIdentity, unit == slice.UnitVolcanoQueues:
		return "fleets/"
	case strings.HasPrefix(unit, slice.VolcanoJobPrefix):
		for _, j := range c.repo.GlobalJobs {
			if strings.HasPrefix(unit, slice.VolcanoJobPrefix+j.Metadata.Name) {
				return j.Source.File
			}
		}
	}
	return d.cl.Source.File
}

// noteCollector gathers notes, each once with the clusters it concerns.
type noteCollector struct {
	mu       sync.Mutex
	clusters map[string][]string
}

func (n *noteCollector) add(note, cluster string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.clusters == nil {
		n.clusters = map[string][]string{}
	}
	n.clusters[note] = append(n.clusters[note], cluster)
}

// list returns the notes sorted, each naming its clusters.
func (n *noteCollector) list() []string {
	var out []string
	for note, cls := range n.clusters {
		named := cls
		if len(named) > maxClustersNamed {
			named = named[:maxClustersNamed]
		}
		out = append(out, note+" ("+describeClusters(named, len(cls))+")")
	}
	sort.Strings(out)
	return out
}
