package kuratorimport

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// policy is one Kurator sync policy on its way to a Flotilla sync policy.
type policy struct {
	index int
	sp    syncPolicy
	dest  fleet.Destination
	ns    string
	vals  map[string]any
}

// shape is what a Flotilla Application holds once for all its sync
// policies; Kurator sync policies with different shapes become separate
// Applications.
type shape struct {
	Helm        bool
	Path        string
	Prune       bool
	Timeout     string
	Chart       string
	Version     string
	ReleaseName string
}

func (c *converter) application(o *object) {
	var spec appSpec
	if !c.decodeSpec(o, &spec) {
		return
	}
	src := spec.Source
	set := 0
	for _, b := range []bool{src.GitRepository != nil, src.HelmRepository != nil, src.OCIRepository != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		c.fail(o, "spec.source", fleet.ErrInvalidValue, "set exactly one of gitRepository, helmRepository or ociRepository")
		return
	}
	if src.OCIRepository != nil {
		c.warn(o, "spec.source.ociRepository", ErrNeedsAction, "application not imported: OCI artifact sources are not supported yet")
		return
	}
	if h := src.HelmRepository; h != nil && h.Type == "oci" && !strings.HasPrefix(h.URL, "oci://") {
		// Flux requires the scheme with type oci; the chart source is an
		// oci:// repo either way.
		c.fail(o, "spec.source.helmRepository.url", fleet.ErrInvalidValue, "%q: an OCI chart repository's URL starts with oci://", h.URL)
		return
	}
	if src.GitRepository != nil && src.GitRepository.URL == "" {
		c.fail(o, "spec.source.gitRepository.url", fleet.ErrRequired, "the Git repository URL")
		return
	}
	if src.GitRepository != nil {
		if _, problem := convertGitRef(src.GitRepository.Ref); problem != "" {
			c.warn(o, "spec.source.gitRepository.ref", ErrNeedsAction, "application not imported: %s", problem)
			return
		}
	}
	if src.HelmRepository != nil && src.HelmRepository.URL == "" {
		c.fail(o, "spec.source.helmRepository.url", fleet.ErrRequired, "the chart repository URL")
		return
	}
	if len(spec.SyncPolicies) == 0 {
		c.fail(o, "spec.syncPolicies", fleet.ErrRequired, "at least one sync policy")
		return
	}
	before := len(c.errs)
	var shapes []shape
	groups := map[shape][]policy{}
	for i, sp := range spec.SyncPolicies {
		p, sh, ok := c.policy(o, &spec, i, sp)
		if !ok {
			continue
		}
		if groups[sh] == nil {
			shapes = append(shapes, sh)
		}
		groups[sh] = append(groups[sh], p)
	}
	if len(c.errs) > before {
		return
	}
	c.res.Warnings = append(c.res.Warnings, unmapped(o)...)
	for _, sh := range shapes {
		ps := groups[sh]
		name := c.names[o]
		if len(shapes) > 1 {
			suffix := ps[0].sp.Name
			if suffix == "" {
				suffix = strconv.Itoa(ps[0].index + 1)
			}
			name += "-" + suffix
		}
		c.emitApp(o, &spec, name, sh, ps)
	}
}

// policy checks sync policy i and resolves its destination.
func (c *converter) policy(o *object, spec *appSpec, i int, sp syncPolicy) (policy, shape, bool) {
	field := "spec.syncPolicies[" + strconv.Itoa(i) + "]"
	p := policy{index: i, sp: sp}
	var sh shape
	switch {
	case (sp.Kustomization == nil) == (sp.Helm == nil):
		c.fail(o, field, fleet.ErrInvalidValue, "set exactly one of kustomization or helm")
		return p, sh, false
	case sp.Kustomization != nil:
		if spec.Source.GitRepository == nil {
			c.fail(o, field+".kustomization", fleet.ErrInvalidValue, "a kustomization needs a gitRepository source")
			return p, sh, false
		}
		k := sp.Kustomization
		sh = shape{Path: cleanPath(k.Path), Prune: k.Prune, Timeout: k.Timeout}
		p.ns = k.TargetNamespace
	default:
		h := sp.Helm
		if h.Chart.Spec.Chart == "" {
			c.fail(o, field+".helm.chart.spec.chart", fleet.ErrRequired, "the chart name (helmRepository) or path (gitRepository)")
			return p, sh, false
		}
		sh = shape{Helm: true, Prune: true, Chart: h.Chart.Spec.Chart, Version: h.Chart.Spec.Version, ReleaseName: h.ReleaseName, Timeout: h.Timeout}
		if spec.Source.GitRepository != nil {
			sh.Chart = cleanPath(sh.Chart)
		}
		p.ns = h.TargetNamespace
		p.vals = h.Values
	}
	dest, dfield := sp.Destination, field+".destination"
	if dest == nil {
		dest, dfield = spec.Destination, "spec.destination"
	}
	if dest == nil || dest.Fleet == "" {
		c.fail(o, field+".destination.fleet", fleet.ErrRequired, "the fleet this policy deploys to (here or in spec.destination); without one, Kurator deploys to its own host cluster, and Flotilla has no host cluster: register that cluster (flotilla bootstrap), name it in a Fleet among the inputs and set destination.fleet")
		return p, sh, false
	}
	d, ok := c.destination(o, dfield, dest)
	p.dest = d
	return p, sh, ok
}

func cleanPath(p string) string {
	p = path.Clean("/" + strings.TrimSpace(p))
	return strings.TrimPrefix(p, "/")
}

// destination resolves a Kurator destination: a fleet in the
// application's namespace, narrowed by clusterSelector to the members whose
// labels match, written as an explicit cluster list.
func (c *converter) destination(o *object, field string, d *destination) (fleet.Destination, bool) {
	f := c.fleets[o.Meta.Namespace+"/"+d.Fleet]
	if f == nil {
		c.fail(o, field+".fleet", fleet.ErrDanglingReference, "no Fleet %s/%s among the inputs; pass its file too", o.Meta.Namespace, d.Fleet)
		return fleet.Destination{}, false
	}
	if d.ClusterSelector == nil || len(d.ClusterSelector.MatchLabels) == 0 {
		return fleet.Destination{Fleet: c.names[f]}, true
	}
	members, ok := c.members[f]
	if !ok {
		return fleet.Destination{}, false // the Fleet's own error says why
	}
	sel := labels.SelectorFromSet(d.ClusterSelector.MatchLabels)
	var names []string
	for _, m := range members {
		if sel.Matches(labels.Set(m.Meta.Labels)) {
			names = append(names, c.names[m])
		}
	}
	if len(names) == 0 {
		c.warn(o, field+".clusterSelector", ErrNeedsAction, "no member of fleet %s matches %s: written as a selector over all clusters, which matches none today but would also match a cluster outside the fleet labelled so; review it", d.Fleet, sel)
		return fleet.Destination{Selector: &metav1.LabelSelector{MatchLabels: d.ClusterSelector.MatchLabels}}, true
	}
	sort.Strings(names)
	return fleet.Destination{Clusters: names}, true
}

func (c *converter) emitApp(o *object, spec *appSpec, name string, sh shape, ps []policy) {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		c.fail(o, "metadata.name", fleet.ErrInvalidValue, "Flotilla application name %q: %s", name, strings.Join(errs, "; "))
		return
	}
	dir := "apps/" + name
	if _, dup := c.res.Files[dir+"/app.yaml"]; dup {
		c.fail(o, "metadata.name", fleet.ErrDuplicate, "Flotilla application name %q is already taken by another imported application", name)
		return
	}
	first := "spec.syncPolicies[" + strconv.Itoa(ps[0].index) + "]"
	app := &fleet.Application{
		TypeMeta: fleet.TypeMeta{APIVersion: fleet.APIVersion, Kind: fleet.KindApplication},
		Metadata: fleet.ObjectMeta{Name: name, Labels: o.Meta.Labels, Annotations: o.Meta.Annotations},
	}
	kind := "kustomization"
	if sh.Helm {
		kind = "helm"
	}
	app.Spec.Timeout = c.duration(o, first+"."+kind+".timeout", sh.Timeout)
	if !sh.Prune {
		f := false
		app.Spec.Prune = &f
	}
	nss, vals := make([]string, len(ps)), make([]map[string]any, len(ps))
	for i, p := range ps {
		nss[i], vals[i] = p.ns, p.vals
	}
	sameNS, sameVals := allEqual(nss), allEqual(vals)
	if sameNS {
		app.Spec.Namespace = nss[0]
	}
	for _, p := range ps {
		sp := fleet.SyncPolicy{Name: p.sp.Name, Destination: p.dest}
		ov := &fleet.Overrides{}
		if !sameNS {
			ov.Namespace = p.ns
		}
		if !sameVals && p.vals != nil {
			raw, err := rawJSON(p.vals)
			if err != nil {
				c.fail(o, "spec.syncPolicies["+strconv.Itoa(p.index)+"].helm.values", fleet.ErrInvalidValue, "%v", err)
				return
			}
			ov.Values = raw
		}
		if k := p.sp.Kustomization; k != nil {
			if err := convertJSON(k.Patches, &ov.Patches); err != nil {
				c.fail(o, "spec.syncPolicies["+strconv.Itoa(p.index)+"].kustomization.patches", fleet.ErrInvalidValue, "%v", err)
				return
			}
			if err := convertJSON(k.Images, &ov.Images); err != nil {
				c.fail(o, "spec.syncPolicies["+strconv.Itoa(p.index)+"].kustomization.images", fleet.ErrInvalidValue, "%v", err)
				return
			}
		}
		if ov.Namespace != "" || ov.Values != nil || len(ov.Patches) > 0 || len(ov.Images) > 0 {
			sp.Overrides = ov
		}
		app.Spec.SyncPolicies = append(app.Spec.SyncPolicies, sp)
	}
	switch {
	case spec.Source.GitRepository != nil:
		// flotilla render vendors it into sources/<name>/ and pins it.
		g := spec.Source.GitRepository
		ref, _ := convertGitRef(g.Ref)
		app.Spec.Source.Git = &fleet.GitSource{URL: g.URL, Ref: ref, Path: sh.Path}
		if sh.Helm {
			app.Spec.Source.Git.Path = sh.Chart
			app.Spec.Source.Helm = &fleet.HelmSource{Path: ".", ReleaseName: sh.ReleaseName}
		} else {
			app.Spec.Source.Kustomize = &fleet.PathSource{Path: "."}
		}
	default:
		app.Spec.Source.Helm = &fleet.HelmSource{Repo: spec.Source.HelmRepository.URL, Chart: sh.Chart, Version: sh.Version, ReleaseName: sh.ReleaseName}
	}
	if sh.Helm && sameVals && vals[0] != nil {
		raw, err := rawJSON(vals[0])
		if err != nil {
			c.fail(o, first+".helm.values", fleet.ErrInvalidValue, "%v", err)
			return
		}
		app.Spec.Source.Helm.Values = raw
	}
	c.emit(o, dir+"/app.yaml", app)
}

// convertJSON copies between the importer's and Flotilla's identically
// shaped Kustomize types.
func convertJSON(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// convertGitRef turns Flux's GitRepositoryRef into a Flotilla ref, in
// Flux's order of precedence (commit, name, semver, tag, branch); no ref
// is Flux's default, branch master. problem says why one has no
// equivalent.
func convertGitRef(r *gitRef) (fleet.GitRef, string) {
	switch {
	case r == nil:
		return fleet.GitRef{Branch: "master"}, ""
	case r.Commit != "":
		if !fullCommit.MatchString(r.Commit) {
			return fleet.GitRef{}, fmt.Sprintf("commit %q is not a full 40-character hash; give the full hash", r.Commit)
		}
		return fleet.GitRef{Commit: r.Commit}, ""
	case r.Name != "":
		if b, ok := strings.CutPrefix(r.Name, "refs/heads/"); ok {
			return fleet.GitRef{Branch: b}, ""
		}
		if t, ok := strings.CutPrefix(r.Name, "refs/tags/"); ok {
			return fleet.GitRef{Tag: t}, ""
		}
		return fleet.GitRef{}, fmt.Sprintf("reference %q is neither a branch nor a tag; write the application with a branch, tag or commit", r.Name)
	case r.SemVer != "":
		return fleet.GitRef{}, fmt.Sprintf("semver range %q: flotilla render pins a branch, tag or commit, not a range; write the application with the tag you want", r.SemVer)
	case r.Tag != "":
		return fleet.GitRef{Tag: r.Tag}, ""
	case r.Branch != "":
		return fleet.GitRef{Branch: r.Branch}, ""
	}
	return fleet.GitRef{Branch: "master"}, ""
}

var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)
