package render

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// templateClientOnly is what `helm template --include-crds` does, in the
// steps Helm's install action runs in client-only dry-run mode, without
// that action: it would link Helm's chart downloader, registry client and
// Kubernetes client into every binary that renders, the agent included.
// The manifest is CRDs first, then the manifests in Helm's install order,
// each after Helm's "# Source:" comment.
func templateClientOnly(ch *chart.Chart, vals map[string]any, req *helmRequest) ([]byte, []*release.Hook, error) {
	if err := chartutil.ValidateReleaseName(req.ReleaseName); err != nil {
		return nil, nil, fmt.Errorf("release name %q: %w", req.ReleaseName, err)
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return nil, nil, err
	}
	caps, err := helmCapabilities(req)
	if err != nil {
		return nil, nil, err
	}
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", ch.Metadata.KubeVersion, caps.KubeVersion.String())
	}
	opts := chartutil.ReleaseOptions{Name: req.ReleaseName, Namespace: req.Namespace, Revision: 1, IsInstall: true}
	values, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, false)
	if err != nil {
		return nil, nil, err
	}
	var e engine.Engine // no cluster: lookup returns empty results, as in helm template
	files, err := e.Render(ch, values)
	if err != nil {
		return nil, nil, err
	}
	for name := range files {
		// NOTES.txt is for people, not the cluster.
		if strings.HasSuffix(name, path.Join("templates", "NOTES.txt")) {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	for _, crd := range ch.CRDObjects() {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, string(crd.File.Data))
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return b.Bytes(), hooks, nil
}

// helmCapabilities are what `helm install --dry-run=client` (and so `helm
// template`) gives a chart: Helm's defaults with the cluster's Kubernetes
// version (DefaultKubeVersion when unknown) and its API versions added, and
// the Helm version as Helm's release binary reports it.
func helmCapabilities(req *helmRequest) (*chartutil.Capabilities, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	v := req.KubeVersion
	if v == "" {
		v = DefaultKubeVersion
	}
	kv, err := chartutil.ParseKubeVersion(v)
	if err != nil {
		return nil, fmt.Errorf("capabilities: %w", err)
	}
	caps.KubeVersion = *kv
	// Copy shares DefaultCapabilities' slice: an append that found spare
	// capacity there would hand this cluster's API versions to every
	// later render (Helm's slice is full today; a new one is made anyway).
	caps.APIVersions = slices.Concat(caps.APIVersions, req.APIVersions)
	caps.HelmVersion.Version = helmVersion
	return caps, nil
}

// helmVersion is the Helm module go.mod requires, as Helm's release binary
// reports itself (Helm's library alone says only "v3.19"); a test keeps it
// equal to go.mod's.
const helmVersion = "v3.19.5"

// checkDependencies fails when Chart.yaml names a dependency that is not
// in the chart's charts/ directory (vendoring puts them there).
func checkDependencies(ch *chart.Chart, reqs []*chart.Dependency) error {
	var missing []string
	for _, r := range reqs {
		found := false
		for _, d := range ch.Dependencies() {
			if d.Name() == r.Name {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, r.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("found in Chart.yaml, but missing in charts/ directory: %s", strings.Join(missing, ", "))
	}
	return nil
}
