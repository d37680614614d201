package fleet

import (
	"bytes"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

func (v *validator) application(a *Application) {
	d := v.docs[a]
	v.meta(d, a.Metadata)
	if strings.HasPrefix(a.Metadata.Name, ReservedNamePrefix) {
		d.errorf("metadata.name", ErrInvalidValue, "names starting with %q are reserved for units the hub generates", ReservedNamePrefix)
	}
	if ns := a.Spec.Namespace; ns != "" {
		dnsLabel(d, "spec.namespace", ns)
	}
	v.appSource(d, a)
	v.dependsOn(d, a)
	if a.Spec.Timeout != nil {
		positiveDuration(d, "spec.timeout", *a.Spec.Timeout)
	}
	healthChecks(d, "spec.healthChecks", a.Spec.HealthChecks)
	if len(a.Spec.SyncPolicies) == 0 {
		d.errorf("spec.syncPolicies", ErrRequired, "an application needs at least one destination")
	}
	names := map[string]int{}
	for i, sp := range a.Spec.SyncPolicies {
		field := indexPath("spec.syncPolicies", i)
		if sp.Name != "" {
			dnsLabel(d, field+".name", sp.Name)
			if j, dup := names[sp.Name]; dup {
				d.errorf(field+".name", ErrDuplicate, "sync policy %q is already declared at spec.syncPolicies[%d]", sp.Name, j)
			}
			names[sp.Name] = i
		}
		clusters, ok := v.destination(d, field+".destination", sp.Destination)
		if sp.Overrides != nil {
			v.overrides(d, field+".overrides", sp.Overrides, clusters)
		}
		if sp.ReplicaScheduling != nil {
			v.replicaScheduling(d, field+".replicaScheduling", sp.ReplicaScheduling, clusters, ok)
		}
	}
	v.replicaConflicts(d, a)
	v.applicationRollout(d, a)
}

func (v *validator) appSource(d *document, a *Application) {
	src := a.Spec.Source
	set := 0
	for _, isSet := range []bool{src.Kustomize != nil, src.Manifests != nil, src.Helm != nil} {
		if isSet {
			set++
		}
	}
	switch {
	case set == 0:
		d.errorf("spec.source", ErrRequired, "set one of kustomize, manifests or helm")
		return
	case set > 1:
		d.errorf("spec.source", ErrInvalidValue, "set only one of kustomize, manifests or helm")
		return
	}
	if src.Git != nil {
		gitSource(d, src.Git)
	}
	switch {
	case src.Kustomize != nil:
		v.sourcePath(d, a, "spec.source.kustomize.path", src.Kustomize.Path)
		v.generatedKustomization(d, a, src.Kustomize.Path)
	case src.Manifests != nil:
		v.sourcePath(d, a, "spec.source.manifests.path", src.Manifests.Path)
	case src.Helm != nil:
		v.helmSource(d, a, src.Helm)
	}
}

// sourcePath checks a path relative to the application's directory: it
// must exist, be a directory holding one of want (if given), and stay in
// the repo, symlinks included.
func (v *validator) sourcePath(d *document, a *Application, field, p string, want ...string) {
	if a.Spec.Source.Git != nil {
		// Inside the vendored copy, which render fetches and checks.
		vendoredPath(d, field, p)
		return
	}
	if p == "" {
		d.errorf(field, ErrRequired, "a path relative to %s/", a.AppDir())
		return
	}
	if strings.HasPrefix(p, "/") || filepath.IsAbs(p) || strings.Contains(p, `\`) {
		d.errorf(field, ErrInvalidValue, "%q must be a slash-separated path relative to %s/", p, a.AppDir())
		return
	}
	rel := path.Join(a.AppDir(), p)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		d.errorf(field, ErrInvalidValue, "%q leaves the repo", p)
		return
	}
	if rel == "rendered" || strings.HasPrefix(rel, "rendered/") {
		d.errorf(field, ErrInvalidValue, "%q is inside rendered/, which the hub generates", p)
		return
	}
	full := filepath.Join(v.r.Root, filepath.FromSlash(rel))
	fi, err := os.Stat(full)
	if err != nil {
		d.errorf(field, ErrInvalidValue, "%s does not exist", rel)
		return
	}
	if !fi.IsDir() {
		d.errorf(field, ErrInvalidValue, "%s is not a directory", rel)
		return
	}
	if real, err := filepath.EvalSymlinks(full); err == nil {
		if rootReal, err := filepath.EvalSymlinks(v.r.Root); err == nil {
			if r, err := filepath.Rel(rootReal, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				d.errorf(field, ErrInvalidValue, "%s leads out of the repo through a symlink", rel)
				return
			}
		}
	}
	if len(want) == 0 {
		return
	}
	for _, w := range want {
		if _, err := os.Stat(filepath.Join(full, w)); err == nil {
			return
		}
	}
	d.errorf(field, ErrInvalidValue, "%s has no %s", rel, want[0])
}

// kustomizationFiles are the names kustomize looks for, in its order.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// hasKustomization reports whether the repo directory rel holds a
// kustomization file.
func (v *validator) hasKustomization(rel string) bool {
	for _, n := range kustomizationFiles {
		if fi, err := os.Stat(filepath.Join(v.r.Root, filepath.FromSlash(rel), n)); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}

// generatedKustomization refuses a kustomize source without a kustomization
// file whose generated one (Flux's rule: every manifest below it, see
// pkg/render) would list the application's own app.yaml, which is no
// object for a cluster. A directory with a kustomization on the way down
// stops the scan there, as it does in Flux.
func (v *validator) generatedKustomization(d *document, a *Application, p string) {
	if a.Spec.Source.Git != nil || p == "" {
		return
	}
	src := path.Join(a.AppDir(), p)
	appDir := a.AppDir()
	if src != "." && appDir != src && !strings.HasPrefix(appDir, src+"/") {
		return
	}
	for dir := appDir; ; dir = path.Dir(dir) {
		if v.hasKustomization(dir) {
			return
		}
		if dir == src || dir == "." {
			break
		}
	}
	d.errorf("spec.source.kustomize.path", ErrInvalidValue,
		"%s has no kustomization.yaml, so like Flux Flotilla generates one listing every manifest below it, and that would include %s/%s: add a kustomization.yaml, or use source.manifests", src, appDir, AppFile)
}

// helmChartName is the chart names a chart repository's index can hold
// and that can become the directory charts/<chart>/ (as pkg/render requires).
var helmChartName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (v *validator) helmSource(d *document, a *Application, h *HelmSource) {
	const field = "spec.source.helm"
	switch {
	case h.Path != "" || a.Spec.Source.Git != nil:
		for _, f := range []struct{ name, value string }{{"repo", h.Repo}, {"chart", h.Chart}, {"version", h.Version}} {
			if f.value != "" {
				d.errorf(field+"."+f.name, ErrInvalidValue, "set either path or repo and chart, not both")
				return
			}
		}
		v.sourcePath(d, a, field+".path", h.Path, "Chart.yaml")
	case h.Repo == "" && h.Chart == "":
		d.errorf(field+".repo", ErrRequired, "set repo and chart, or path")
	default:
		if h.Repo == "" {
			d.errorf(field+".repo", ErrRequired, "chart %q needs the repo that serves it", h.Chart)
		} else if u, err := url.Parse(h.Repo); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "oci") {
			d.errorf(field+".repo", ErrInvalidValue, "not an http:// or https:// chart repository URL or an oci:// registry path")
		} else if u.Scheme == "oci" && (u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(u.Path, ":@")) {
			d.errorf(field+".repo", ErrInvalidValue, "an oci:// repository is host/path only: the chart is named by chart, its tag by version")
		} else if u.User != nil {
			// Never echo it: the URL holds a secret.
			d.errorf(field+".repo", ErrInvalidValue, "must not embed credentials")
		}
		if h.Chart == "" {
			d.errorf(field+".chart", ErrRequired, "the chart's name in the repo")
		} else if !helmChartName.MatchString(h.Chart) {
			d.errorf(field+".chart", ErrInvalidValue, "%q is not a chart name", h.Chart)
		}
		if h.Version != "" {
			if _, err := semver.NewConstraint(h.Version); err != nil {
				d.errorf(field+".version", ErrInvalidValue, "%q is not a version or semver range: %v", h.Version, err)
			}
		}
	}
	if rn := h.ReleaseName; rn != "" {
		// Helm's own limit: the release name ends up in labels and Secret names.
		if errs := validation.IsDNS1123Subdomain(rn); len(errs) > 0 || len(rn) > 53 {
			d.errorf(field+".releaseName", ErrInvalidValue, "%q must be a DNS-1123 subdomain of at most 53 characters", rn)
		}
	}
	checkValues(d, field+".values", h.Values)
}

// checkValues requires Helm values to be a mapping.
func checkValues(d *document, field string, raw *runtime.RawExtension) {
	if raw == nil || len(raw.Raw) == 0 {
		return
	}
	b := bytes.TrimSpace(raw.Raw)
	if len(b) > 0 && b[0] != '{' && !bytes.Equal(b, []byte("null")) {
		d.errorf(field, ErrInvalidValue, "Helm values must be a mapping")
	}
}

// replicaConflicts rejects a workload whose replicas two sync policies set
// on one cluster by division, or by division and an override: the result
// would depend on an order nobody wrote down.
func (v *validator) replicaConflicts(d *document, a *Application) {
	type claim struct {
		policy int
		field  string
	}
	divided := map[string]claim{}  // cluster \x00 kind/name
	overridden := map[string]int{} // cluster \x00 name
	for i, sp := range a.Spec.SyncPolicies {
		if sp.Overrides == nil || len(sp.Overrides.Replicas) == 0 {
			continue
		}
		for _, c := range v.r.Resolve(sp.Destination) {
			for _, r := range sp.Overrides.Replicas {
				overridden[c.Metadata.Name+"\x00"+r.Name] = i
			}
		}
	}
	for i, sp := range a.Spec.SyncPolicies {
		rs := sp.ReplicaScheduling
		if rs == nil || rs.Target.Name == "" {
			continue
		}
		field := indexPath("spec.syncPolicies", i) + ".replicaScheduling.target"
		kind := rs.Target.Kind
		if kind == "" {
			kind = "Deployment"
		}
		workload := kind + "/" + rs.Target.Name
		for _, c := range v.r.Resolve(sp.Destination) {
			key := c.Metadata.Name + "\x00" + workload
			if prev, dup := divided[key]; dup && prev.policy != i {
				d.errorf(field, ErrDuplicate, "%s on cluster %s is already divided by spec.syncPolicies[%d]", workload, c.Metadata.Name, prev.policy)
				break
			}
			divided[key] = claim{i, field}
			if j, ok := overridden[c.Metadata.Name+"\x00"+rs.Target.Name]; ok {
				d.errorf(field, ErrInvalidValue, "%s on cluster %s is both divided here and given replicas by spec.syncPolicies[%d].overrides.replicas", workload, c.Metadata.Name, j)
				break
			}
		}
	}
}
