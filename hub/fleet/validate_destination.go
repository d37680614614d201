package fleet

import (
	"math"
)

// destination checks one destination and returns the clusters it selects;
// ok is false when it is invalid.
func (v *validator) destination(d *document, field string, dest Destination) ([]*Cluster, bool) {
	// A fleet may be narrowed by a selector (the clusters of the fleet the
	// selector matches, as Kurator users write it); otherwise exactly one
	// of fleet, selector and clusters is set.
	switch {
	case dest.Fleet == "" && dest.Selector == nil && len(dest.Clusters) == 0:
		d.errorf(field, ErrRequired, "set one of fleet, selector or clusters")
		return nil, false
	case len(dest.Clusters) > 0 && (dest.Fleet != "" || dest.Selector != nil):
		d.errorf(field, ErrInvalidValue, "clusters names the clusters itself; set it without fleet or selector")
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
		if dest.Selector != nil && !checkSelector(d, field+".selector", dest.Selector) {
			return nil, false
		}
		cs := v.r.Resolve(dest)
		switch {
		case len(v.r.Members(f)) == 0:
			v.warnf(d, field+".fleet", ErrNoMatch, "fleet %s has no member", dest.Fleet)
		case len(cs) == 0:
			v.warnf(d, field+".selector", ErrNoMatch, "the selector matches no member of fleet %s", dest.Fleet)
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
