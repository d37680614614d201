package fleetrender

import (
	"fmt"
	"maps"
	"strings"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// declaredNamespace is a namespace with the fleet that declared it first.
type declaredNamespace struct {
	spec  fleet.NamespaceSpec
	fleet *fleet.Fleet
}

// namespacesUnit returns the flotilla-namespaces unit of a cluster: every
// namespace declared by a fleet the cluster belongs to, so each exists on
// every member identically. Nil when the cluster's fleets declare none.
// Clusters in the same fleets share one unit.
func (c *compiler) namespacesUnit(cl *fleet.Cluster) *unitContent {
	fleets := c.repo.FleetsOf(cl)
	var key strings.Builder
	for _, f := range fleets {
		key.WriteString(f.Metadata.Name)
		key.WriteByte(',')
	}
	k := key.String()
	if u, ok := c.nsMemo[k]; ok {
		return u
	}
	u := c.buildNamespacesUnit(cl, fleets)
	c.nsMemo[k] = u
	return u
}

func (c *compiler) buildNamespacesUnit(cl *fleet.Cluster, fleets []*fleet.Fleet) *unitContent {
	byName := map[string]declaredNamespace{}
	ok := true
	for _, f := range fleets {
		for j, ns := range f.Spec.Namespaces {
			prev, seen := byName[ns.Name]
			if !seen {
				byName[ns.Name] = declaredNamespace{spec: ns, fleet: f}
				continue
			}
			if !maps.Equal(prev.spec.Labels, ns.Labels) || !maps.Equal(prev.spec.Annotations, ns.Annotations) {
				c.errs.addf(f.Source.File, f.Source.Line, fmt.Sprintf("spec.namespaces[%d]", j), ErrConflict, cl.Metadata.Name,
					"namespace %s is declared differently in %s (fleet %s); a namespace must be identical on every member",
					ns.Name, prev.fleet.Source.File, prev.fleet.Metadata.Name)
				ok = false
			}
		}
	}
	if !ok || len(byName) == 0 {
		return nil
	}
	u, err := namespacesContent(byName, nil)
	if err != nil {
		c.errs.addf(cl.Source.File, cl.Source.Line, "", fleet.ErrInvalidValue, cl.Metadata.Name, "generate namespaces: %v", err)
		return nil
	}
	return u
}

// namespaceMeta is the labels and annotations of a Namespace.
type namespaceMeta struct {
	labels, annotations map[string]string
}

// namespacesContent generates the namespaces unit for the declared
// namespaces, with merged's labels and annotations (applications' copies
// of them, ownership.go) added to the fleets'.
func namespacesContent(byName map[string]declaredNamespace, merged map[string]namespaceMeta) (*unitContent, error) {
	docs := make([]any, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		ns := byName[name].spec
		m := merged[name]
		meta := orderedMap{{"name", ns.Name}}.
			add("labels", stringMap(union(ns.Labels, m.labels))).
			add("annotations", stringMap(union(ns.Annotations, m.annotations)))
		docs = append(docs, orderedMap{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", meta}})
	}
	nsData, err := marshalDocs(docs...)
	if err != nil {
		return nil, err
	}
	kust, err := marshalKustomization("", []string{NamespacesFile}, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	files := []unitFile{{name: KustomizationFile, data: kust}, {name: NamespacesFile, data: nsData}}
	return &unitContent{files: files, hash: unitHash(files, ""), declared: byName}, nil
}

// union is a's entries plus b's (b does not override a; callers check for
// conflicts first).
func union(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := maps.Clone(b)
	maps.Copy(out, a)
	return out
}
