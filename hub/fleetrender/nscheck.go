package fleetrender

import (
	"errors"
	"strconv"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// ErrUndeclaredNamespace classes the warning for an application whose
// objects go to a namespace nothing creates on the cluster: no fleet of
// the cluster declares it and no unit of its slice renders it. The agent
// does not create namespaces, so its apply fails there; plan repeats the
// warning.
var ErrUndeclaredNamespace = errors.New("namespace declared by no fleet")

// presentNamespaces exist on every cluster without anyone declaring them;
// flotilla-system is where bootstrap installs the agent by default.
var presentNamespaces = map[string]bool{
	"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true,
	"flotilla-system": true,
}

// checkNamespaces warns, per application unit of d, about each namespace
// its objects go to that no fleet of the cluster declares and no unit of
// the slice creates. A unit that did not render here is checked by its
// namespace alone.
func (c *compiler) checkNamespaces(d *clusterDraft, objects map[*unitContent]*unitObjects) {
	have := map[string]bool{}
	if ns := d.contents[slice.UnitNamespaces]; ns != nil {
		for name := range ns.declared {
			have[name] = true
		}
	}
	for _, u := range d.units {
		if uo := objects[d.contents[u.Name]]; uo != nil {
			for name := range uo.namespaces {
				have[name] = true
			}
		}
	}
	for _, u := range d.units {
		app := d.apps[u.Name]
		if app == nil {
			continue
		}
		targets := map[string]bool{}
		if u.Namespace != "" {
			targets[u.Namespace] = true
		}
		if uo := objects[d.contents[u.Name]]; uo != nil {
			for _, k := range uo.keys {
				if k.namespace != "" {
					targets[k.namespace] = true
				}
			}
		}
		for _, ns := range sortedKeys(targets) {
			if have[ns] || presentNamespaces[ns] {
				continue
			}
			field := "spec.source"
			if ns == u.Namespace {
				field = c.namespaceField(app, d.cluster)
			}
			c.warns.addf(app.Source.File, app.Line(field), field, ErrUndeclaredNamespace, d.cluster,
				"application %s puts objects in namespace %s, which no fleet of the cluster declares (spec.namespaces) and no unit creates; "+
					"the agent does not create namespaces, so its apply will fail there", app.Metadata.Name, ns)
		}
	}
}

// namespaceField is the field that sets an application's namespace on a
// cluster: the last matching policy's override, else spec.namespace.
func (c *compiler) namespaceField(a *fleet.Application, cluster string) string {
	field := "spec.namespace"
	for _, p := range c.apps {
		if p.app != a {
			continue
		}
		for _, pp := range p.policies {
			if pp.clusters[cluster] && pp.policy.Overrides != nil && pp.policy.Overrides.Namespace != "" {
				field = "spec.syncPolicies[" + strconv.Itoa(pp.index) + "].overrides.namespace"
			}
		}
	}
	return field
}
