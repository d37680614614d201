package fleetrender

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// appUnit returns the application's unit content on cluster cl, shared with
// every other cluster whose unit cannot differ: same matching policies, no
// cluster variables, same replica shares.
func (c *compiler) appUnit(p *appPlan, matched []*policyPlan, cl *fleet.Cluster) *unitContent {
	var key strings.Builder
	perCluster := p.baseVars
	for _, pp := range matched {
		key.WriteString(strconv.Itoa(pp.index))
		if pp.shares != nil {
			key.WriteByte('=')
			key.WriteString(strconv.FormatInt(pp.shares[cl.Metadata.Name], 10))
		}
		key.WriteByte(',')
		perCluster = perCluster || pp.usesVars
	}
	if perCluster {
		key.WriteString("@")
		key.WriteString(cl.Metadata.Name)
	}
	k := key.String()
	if u, ok := p.memo[k]; ok {
		return u
	}
	u := c.buildAppUnit(p, matched, cl)
	if !perCluster || u != nil {
		// A failure that does not depend on the cluster is reported once.
		p.memo[k] = u
	}
	return u
}

// buildAppUnit applies the matched policies, in precedence order, to the
// application for one cluster.
func (c *compiler) buildAppUnit(p *appPlan, matched []*policyPlan, cl *fleet.Cluster) *unitContent {
	a := p.app
	name := cl.Metadata.Name
	ok := true
	expand := func(s, field string) string {
		if !usesClusterVars(s) {
			return s
		}
		vars, err := fleet.ClusterVars(s)
		if err != nil {
			c.field(a, field, fleet.ErrInvalidValue, "", "%s", withoutClass(err, fleet.ErrInvalidValue))
			ok = false
			return s
		}
		for _, v := range vars {
			if _, has := cl.Metadata.Labels[v.Label]; v.Label != "" && !has {
				c.field(a, field, fleet.ErrInvalidValue, name, "${cluster.labels.%s}: the cluster has no label %q", v.Label, v.Label)
				ok = false
				return s
			}
		}
		out, err := fleet.ExpandClusterVars(s, cl)
		if err != nil {
			c.field(a, field, fleet.ErrInvalidValue, name, "%s", withoutClass(err, fleet.ErrInvalidValue))
			ok = false
		}
		return out
	}

	namespace := a.Spec.Namespace
	var patches []fleet.Patch
	images := map[string]fleet.Image{}
	replicas := map[string]int64{}
	dividedBy := map[string]int{}
	var values map[string]any
	if p.kind == slice.UnitHelm {
		values = c.expandValues(p.baseValues, "spec.source.helm.values", expand)
	}
	for _, pp := range matched {
		prefix := "spec.syncPolicies[" + strconv.Itoa(pp.index) + "]"
		if ov := pp.policy.Overrides; ov != nil {
			if ov.Namespace != "" {
				namespace = expand(ov.Namespace, prefix+".overrides.namespace")
				if errs := validation.IsDNS1123Label(namespace); ok && len(errs) > 0 {
					c.field(a, prefix+".overrides.namespace", fleet.ErrInvalidValue, name, "%q: %s", namespace, strings.Join(errs, "; "))
					ok = false
				}
			}
			for j, pt := range ov.Patches {
				f := fmt.Sprintf("%s.overrides.patches[%d]", prefix, j)
				np := fleet.Patch{Patch: expand(pt.Patch, f+".patch")}
				if t := pt.Target; t != nil {
					np.Target = &fleet.PatchTarget{
						Group:              expand(t.Group, f+".target.group"),
						Version:            expand(t.Version, f+".target.version"),
						Kind:               expand(t.Kind, f+".target.kind"),
						Name:               expand(t.Name, f+".target.name"),
						Namespace:          expand(t.Namespace, f+".target.namespace"),
						LabelSelector:      expand(t.LabelSelector, f+".target.labelSelector"),
						AnnotationSelector: expand(t.AnnotationSelector, f+".target.annotationSelector"),
					}
				}
				patches = append(patches, np)
			}
			for j, im := range ov.Images {
				f := fmt.Sprintf("%s.overrides.images[%d]", prefix, j)
				ni := fleet.Image{
					Name:    expand(im.Name, f+".name"),
					NewName: expand(im.NewName, f+".newName"),
					NewTag:  expand(im.NewTag, f+".newTag"),
					Digest:  expand(im.Digest, f+".digest"),
				}
				images[ni.Name] = ni
			}
			for _, r := range ov.Replicas {
				replicas[r.Name] = int64(r.Count)
			}
			if pp.values != nil {
				values = mergeValues(values, c.expandValues(pp.values, prefix+".overrides.values", expand))
			}
		}
		if rs := pp.policy.ReplicaScheduling; rs != nil {
			target := rs.Target.Name
			if first, dup := dividedBy[target]; dup {
				c.field(a, prefix+".replicaScheduling.target", ErrConflict, name,
					"workload %s is also divided by spec.syncPolicies[%d]; one cluster can follow only one division", target, first)
				ok = false
			}
			dividedBy[target] = pp.index
			replicas[target] = pp.shares[name]
		}
	}
	if !ok {
		return nil
	}
	// A chart's objects keep the namespaces it gives them: the release
	// namespace (the unit's) fills only those without one, at render, as
	// helm install does; kustomize's namespace: would override them all.
	kustNamespace := namespace
	if p.kind == slice.UnitHelm {
		kustNamespace = ""
	}
	args := &kustomizationArgs{namespace: kustNamespace, resources: p.resources, patches: patches, images: images, replicas: replicas}
	kust, err := args.marshal()
	if err != nil {
		c.field(a, "spec", fleet.ErrInvalidValue, name, "generate kustomization: %v", err)
		return nil
	}
	u := &unitContent{namespace: namespace, files: []unitFile{{name: KustomizationFile, data: kust}}, kust: args, digest: p.digest}
	if p.kind == slice.UnitHelm {
		vals, err := marshalValues(values)
		if err != nil {
			c.field(a, "spec.source.helm.values", fleet.ErrInvalidValue, name, "generate values: %v", err)
			return nil
		}
		u.files = append(u.files, unitFile{name: slice.ValuesFile, data: vals})
	}
	u.hash = unitHash(u.files, p.digest)
	return u
}

// withoutClass drops the "<class>: " prefix fleet's errors carry, since the
// FieldError built from them names the class itself.
func withoutClass(err, class error) string {
	return strings.TrimPrefix(err.Error(), class.Error()+": ")
}

// expandValues expands cluster variables in every string of a values tree;
// a failing leaf is reported with its field path.
func (c *compiler) expandValues(v map[string]any, field string, expand func(s, field string) string) map[string]any {
	if v == nil {
		return nil
	}
	m, _ := expandTree(v, field, expand).(map[string]any)
	return m
}

// unitHash covers the unit directory's files and the digest of everything
// else the unit's render reads (slice.UnitHash, which the agent checks).
func unitHash(files []unitFile, inputs string) string {
	fs := make([]slice.File, len(files))
	for i, f := range files {
		fs[i] = slice.File{Name: f.name, Data: f.data}
	}
	return slice.UnitHash(fs, inputs)
}
