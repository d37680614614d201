package fleet

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

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
	healthChecks(d, "spec.healthChecks", f.Spec.HealthChecks)
	if f.Spec.Rollout != nil {
		v.rollout(d, "spec.rollout", f.Spec.Rollout, v.r.Members(f), "fleet "+f.Metadata.Name)
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
