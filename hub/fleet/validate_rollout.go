package fleet

import (
	"strings"
)

// rollout checks a rollout declared at field over members (a fleet's
// members or an application's destinations), named by scope in messages.
func (v *validator) rollout(d *document, field string, ro *Rollout, members []*Cluster, scope string) {
	if len(ro.Waves) == 0 {
		d.errorf(field+".waves", ErrRequired, "a rollout needs at least one wave")
	}
	if ro.Bake != nil && ro.Bake.Duration < 0 {
		d.errorf(field+".bake", ErrInvalidValue, "%s must not be negative", ro.Bake.Duration)
	}
	nonNegativeCount(d, field+".maxFailures", ro.MaxFailures)
	isMember := map[string]bool{}
	for _, c := range members {
		isMember[c.Metadata.Name] = true
	}
	names := map[string]string{}
	owner := map[string]string{} // cluster -> field of the wave that names it
	percent := 0
	for i, w := range ro.Waves {
		wf := indexPath(field+".waves", i)
		if w.Name != "" {
			if dnsLabel(d, wf+".name", w.Name) && w.Name == RestWave {
				d.errorf(wf+".name", ErrInvalidValue, "%q names the implicit last wave (clusters in no wave)", RestWave)
			}
		}
		name := WaveName(w, i)
		if prev, dup := names[name]; dup {
			d.errorf(wf+".name", ErrDuplicate, "wave %q is already declared at %s", name, prev)
		}
		names[name] = wf
		nonNegativeCount(d, wf+".maxFailures", w.MaxFailures)
		set := 0
		for _, isSet := range []bool{len(w.Clusters) > 0, w.Selector != nil, w.Percent != nil, w.Count != nil} {
			if isSet {
				set++
			}
		}
		switch {
		case set == 0:
			d.errorf(wf, ErrRequired, "set one of clusters, selector, percent or count")
			continue
		case set > 1:
			d.errorf(wf, ErrInvalidValue, "set only one of clusters, selector, percent or count")
			continue
		}
		var claimed []string
		var claimedField func(j int) string
		switch {
		case len(w.Clusters) > 0:
			v.clusterNames(d, wf+".clusters", w.Clusters)
			for j, n := range w.Clusters {
				if v.r.Cluster(n) != nil && !isMember[n] {
					d.errorf(indexPath(wf+".clusters", j), ErrInvalidValue, "cluster %q is not in %s", n, scope)
				}
			}
			claimed = w.Clusters
			claimedField = func(j int) string { return indexPath(wf+".clusters", j) }
		case w.Selector != nil:
			if !checkSelector(d, wf+".selector", w.Selector) {
				continue
			}
			for _, c := range v.r.pick(nil, w.Selector, nil) {
				if isMember[c.Metadata.Name] {
					claimed = append(claimed, c.Metadata.Name)
				}
			}
			if len(claimed) == 0 {
				v.warnf(d, wf+".selector", ErrNoMatch, "the selector matches no cluster in %s", scope)
			}
			claimedField = func(int) string { return wf + ".selector" }
		case w.Percent != nil:
			p := int(*w.Percent)
			if p < 1 || p > 100 {
				d.errorf(wf+".percent", ErrInvalidValue, "%d is not between 1 and 100", p)
				continue
			}
			percent += p
			if percent > 100 {
				d.errorf(wf+".percent", ErrInvalidValue, "the waves' percentages add up to %d%%, more than 100%%", percent)
			}
		case w.Count != nil:
			if *w.Count < 1 {
				d.errorf(wf+".count", ErrInvalidValue, "%d must be at least 1", *w.Count)
			}
		}
		for j, n := range claimed {
			if !isMember[n] {
				continue
			}
			if prev, dup := owner[n]; dup && !strings.HasPrefix(prev, wf+".") {
				d.errorf(claimedField(j), ErrDuplicate, "cluster %q is already in the wave at %s; waves may not overlap", n, prev)
				continue
			}
			if _, dup := owner[n]; !dup {
				owner[n] = claimedField(j)
			}
		}
	}
}

// applicationRollout checks the application's own rollout, or that its
// destinations do not inherit two different ones.
func (v *validator) applicationRollout(d *document, a *Application) {
	if a.Spec.Rollout != nil {
		v.rollout(d, "spec.rollout", a.Spec.Rollout, v.r.Destinations(a), "the application's destinations")
		return
	}
	if fs := v.r.rolloutFleets(a); len(fs) > 1 {
		d.errorf("spec.syncPolicies", ErrInvalidValue, "fleets %s and %s both declare a rollout; set spec.rollout to choose this application's waves",
			fs[0].Metadata.Name, fs[1].Metadata.Name)
	}
}

func nonNegativeCount(d *document, field string, n *int32) {
	if n != nil && *n < 0 {
		d.errorf(field, ErrInvalidValue, "%d must not be negative", *n)
	}
}
