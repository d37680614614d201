package render

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// The fidelity tests render charts and trees written to probe the edges
// (testdata/fidelity) with Flotilla and with the real tools, and compare
// the objects: Helm's own install action (client-only dry run, as `helm
// template` and `helm install --dry-run=client` run it) and Helm's kube
// client, which places the objects in namespaces as `helm install` does;
// krusty for Kustomize.

const fidelityRepo = "testdata/fidelity"

// fidelityCluster is the cluster the charts are rendered for: its version,
// the API versions it serves beyond Helm's defaults, and the scope of every
// kind the charts use, as its discovery would report them.
var fidelityCluster = struct {
	kubeVersion string
	apiVersions []string
	scopes      map[schema.GroupVersionKind]bool // true: namespaced
}{
	kubeVersion: "v1.33.2",
	apiVersions: []string{"ext.example.com/v1", "ext.example.com/v1/ExternalIssuer"},
	scopes: map[schema.GroupVersionKind]bool{
		{Version: "v1", Kind: "ConfigMap"}:                                                        true,
		{Version: "v1", Kind: "Service"}:                                                          true,
		{Version: "v1", Kind: "ServiceAccount"}:                                                   true,
		{Group: "batch", Version: "v1", Kind: "Job"}:                                              true,
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}:                         true,
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}:                  true,
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}:                  false,
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}:           false,
		{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}: false,
		{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}:          false,
		{Group: "probe.example.com", Version: "v1", Kind: "ClusterThing"}:                         false,
		{Group: "probe.example.com", Version: "v1", Kind: "Gadget"}:                               true,
		{Group: "ext.example.com", Version: "v1", Kind: "ExternalIssuer"}:                         false,
	},
}

// discoveredScopes are fidelityCluster's scopes as the agent's discovery
// gives them to render.
func discoveredScopes() map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for gvk, namespaced := range fidelityCluster.scopes {
		out[gvk.GroupKind()] = namespaced
	}
	return out
}

// helmOracle is what `helm install --namespace ns` creates for the chart:
// the install action's client-only dry run renders it (CRDs included, test
// hooks left out as Flotilla documents), and Helm's kube client builds the
// objects against the cluster's REST mapping, which fills the release
// namespace into namespaced objects without one. A cluster-scoped object is
// held without a namespace (the API server drops one sent with it).
func helmOracle(t *testing.T, chartDir, name, ns string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.ClientOnly, install.DryRun, install.Replace, install.IncludeCRDs = true, true, true, true
	install.ReleaseName, install.Namespace = name, ns
	kv, err := chartutil.ParseKubeVersion(fidelityCluster.kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	install.KubeVersion = kv
	install.APIVersions = fidelityCluster.apiVersions
	rel, err := install.Run(ch, values)
	if err != nil {
		t.Fatalf("helm install (client-only dry run): %v", err)
	}
	manifest := rel.Manifest
	for _, h := range rel.Hooks {
		if !slices.Contains(h.Events, release.HookTest) {
			manifest += "\n---\n" + h.Manifest
		}
	}

	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk, namespaced := range fidelityCluster.scopes {
		scope := meta.RESTScopeRoot
		if namespaced {
			scope = meta.RESTScopeNamespace
		}
		mapper.Add(gvk, scope)
	}
	cfg := clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{ClusterInfo: clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}})
	getter := genericclioptions.NewTestConfigFlags().WithRESTMapper(mapper).WithClientConfig(cfg)
	client := kube.New(getter)
	client.Namespace = ns
	infos, err := client.Build(strings.NewReader(manifest), false)
	if err != nil {
		t.Fatalf("helm's kube client: %v", err)
	}
	var out []*unstructured.Unstructured
	for _, info := range infos {
		u := info.Object.(*unstructured.Unstructured)
		if info.Mapping.Scope.Name() == meta.RESTScopeNameRoot {
			u.SetNamespace("")
		}
		out = append(out, u)
	}
	return out
}

func byKey(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[objectKey(o)] = o
	}
	return m
}

// sameObjects fails the test for every object one side has and the other
// has not, or has with other content.
func sameObjects(t *testing.T, got, want []*unstructured.Unstructured) {
	t.Helper()
	g, w := byKey(got), byKey(want)
	for _, k := range slices.Sorted(maps.Keys(w)) {
		o, ok := g[k]
		if !ok {
			t.Errorf("missing %s (have %v)", k, slices.Sorted(maps.Keys(g)))
			continue
		}
		gy, _ := sigsyaml.Marshal(o.Object)
		wy, _ := sigsyaml.Marshal(w[k].Object)
		if !bytes.Equal(gy, wy) {
			t.Errorf("%s differs:\n--- flotilla\n%s--- oracle\n%s", k, gy, wy)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(g)) {
		if _, ok := w[k]; !ok {
			t.Errorf("extra %s", k)
		}
	}
}

func unitObjects(res *Result) []*unstructured.Unstructured {
	all := slices.Clone(res.Objects)
	for _, h := range res.Hooks {
		all = append(all, h.Object)
	}
	return all
}

func TestHelmUnitMatchesHelmInstall(t *testing.T) {
	values := map[string]any{}
	data, err := os.ReadFile(filepath.Join(fidelityRepo, "units/probe/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	want := helmOracle(t, filepath.Join(fidelityRepo, "charts/probe"), "probe", "apps", values)
	u := slice.Unit{Name: "probe", Kind: slice.UnitHelm, Path: "units/probe", Namespace: "apps",
		Helm: &slice.HelmRelease{Chart: "charts/probe", ReleaseName: "probe", Values: "units/probe/values.yaml"}}

	t.Run("agent", func(t *testing.T) {
		// The agent renders with its cluster's discovery.
		res, err := Unit(context.Background(), fidelityRepo, u, Options{Capabilities: Capabilities{
			KubeVersion: fidelityCluster.kubeVersion, APIVersions: fidelityCluster.apiVersions, Namespaced: discoveredScopes(),
		}})
		if err != nil {
			t.Fatal(err)
		}
		sameObjects(t, unitObjects(res), want)
		if len(res.UnknownScope) > 0 {
			t.Errorf("UnknownScope = %v with discovery", res.UnknownScope)
		}
	})

	t.Run("hub", func(t *testing.T) {
		// The hub knows the built-in kinds and the chart's CRDs, not the
		// CRDs the cluster has besides: it says which scope it assumed.
		res, err := Unit(context.Background(), fidelityRepo, u, Options{Capabilities: Capabilities{
			KubeVersion: fidelityCluster.kubeVersion, APIVersions: fidelityCluster.apiVersions,
		}})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"ExternalIssuer.ext.example.com"}; !slices.Equal(res.UnknownScope, want) {
			t.Errorf("UnknownScope = %v, want %v", res.UnknownScope, want)
		}
		var known []*unstructured.Unstructured
		for _, o := range unitObjects(res) {
			if o.GetKind() == "ExternalIssuer" {
				if o.GetNamespace() != "apps" {
					t.Errorf("ExternalIssuer of unknown scope: namespace %q, want the chart's %q", o.GetNamespace(), "apps")
				}
				continue
			}
			known = append(known, o)
		}
		var wantKnown []*unstructured.Unstructured
		for _, o := range want {
			if o.GetKind() != "ExternalIssuer" {
				wantKnown = append(wantKnown, o)
			}
		}
		sameObjects(t, known, wantKnown)
	})

	// What the probe chart is there to show, spelled out.
	got := byKey(want)
	for key, ns := range map[string]string{
		"rbac.authorization.k8s.io/RoleBinding kube-system/probe-auth-reader":            "kube-system",
		"rbac.authorization.k8s.io/Role kube-system/probe-leader-election":               "kube-system",
		"/ConfigMap monitoring/probe-elsewhere":                                          "monitoring",
		"/ConfigMap monitoring/probe-hook-elsewhere":                                     "monitoring",
		"/ConfigMap apps/probe-plain":                                                    "apps",
		"/ConfigMap apps/probe-sub":                                                      "apps",
		"probe.example.com/ClusterThing /probe-thing":                                    "",
		"probe.example.com/Gadget apps/probe-gadget":                                     "apps",
		"rbac.authorization.k8s.io/ClusterRole /probe-reader":                            "",
		"admissionregistration.k8s.io/ValidatingAdmissionPolicy /probe-policy":           "",
		"ext.example.com/ExternalIssuer /probe-issuer":                                   "",
		"apiextensions.k8s.io/CustomResourceDefinition /clusterthings.probe.example.com": "",
	} {
		if o, ok := got[key]; !ok || o.GetNamespace() != ns {
			t.Errorf("oracle: %s not found in namespace %q", key, ns)
		}
	}
	caps := got["/ConfigMap apps/probe-capabilities"]
	if v, _, _ := unstructured.NestedString(caps.Object, "data", "kubeVersion"); v != fidelityCluster.kubeVersion {
		t.Errorf("oracle: kubeVersion %q", v)
	}
}

// TestHelmDefaultCapabilities: without the cluster's version, charts see
// DefaultKubeVersion (a chart requiring a current Kubernetes renders), and
// the Helm version this binary links in full.
func TestHelmDefaultCapabilities(t *testing.T) {
	u := slice.Unit{Name: "probe", Kind: slice.UnitHelm, Path: "units/probe", Namespace: "apps",
		Helm: &slice.HelmRelease{Chart: "charts/probe", ReleaseName: "probe", Values: "units/probe/values.yaml"}}
	res, err := Unit(context.Background(), fidelityRepo, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if o.GetName() == "probe-capabilities" {
			if v, _, _ := unstructured.NestedString(o.Object, "data", "kubeVersion"); v != DefaultKubeVersion {
				t.Errorf("kubeVersion = %q, want %q", v, DefaultKubeVersion)
			}
			if v, _, _ := unstructured.NestedString(o.Object, "data", "policyAPI"); v != "admissionregistration.k8s.io/v1" {
				t.Errorf("policyAPI = %q: the chart took the branch for an old Kubernetes", v)
			}
		}
	}
	if v := goModVersion(t, "helm.sh/helm/v3"); helmVersion != v {
		t.Errorf("helmVersion = %s, go.mod requires Helm %s", helmVersion, v)
	}
}

// TestDefaultKubeVersionFollowsClientGo keeps DefaultKubeVersion at the
// Kubernetes minor of the client-go this module links, the rule Helm's
// release builds apply to their own default.
func TestDefaultKubeVersionFollowsClientGo(t *testing.T) {
	v := goModVersion(t, "k8s.io/client-go") // v0.37.0
	minor, _, _ := strings.Cut(strings.TrimPrefix(v, "v0."), ".")
	if want := "v1." + minor + ".0"; DefaultKubeVersion != want {
		t.Errorf("DefaultKubeVersion = %s, client-go %s says %s", DefaultKubeVersion, v, want)
	}
}

// TestKustomizeNamespaceMatchesKrusty: a kustomize unit's namespace: works
// as kustomize build, except where the cluster would hold the object
// otherwise (a cluster-scoped kind kustomize does not know) and for
// non-ServiceAccount subjects, which keep no namespace.
func TestKustomizeNamespaceMatchesKrusty(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(fidelityRepo, "kust"))
	if err != nil {
		t.Fatal(err)
	}
	y, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var want []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(y), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			break
		}
		want = append(want, &unstructured.Unstructured{Object: obj})
	}

	res, err := Unit(context.Background(), fidelityRepo, slice.Unit{Name: "kust", Kind: slice.UnitKustomize, Path: "kust", Namespace: "apps"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The documented differences, checked one by one, then taken out of
	// krusty's objects so that everything else must be equal.
	deviations := 0
	for _, o := range want {
		switch o.GetKind() {
		case "DeviceClass", "ClusterThing":
			if o.GetNamespace() != "apps" {
				t.Fatalf("krusty no longer sets a namespace on %s: drop the deviation", o.GetKind())
			}
			o.SetNamespace("")
			deviations++
		case "RoleBinding", "ClusterRoleBinding":
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				m := s.(map[string]any)
				if _, ok := m["namespace"]; ok && m["kind"] != "ServiceAccount" {
					delete(m, "namespace")
					deviations++
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
		}
	}
	if deviations != 6 {
		t.Errorf("%d documented deviations from krusty, the tree has 6", deviations)
	}
	sameObjects(t, res.Objects, want)
}

// goModVersion is the version of a module the root go.mod requires.
func goModVersion(t *testing.T, path string) string {
	t.Helper()
	return goModVersionIn(t, "../../go.mod", path)
}

// goModVersionIn is the version of a module a go.mod requires.
func goModVersionIn(t *testing.T, goMod, path string) string {
	t.Helper()
	data, err := os.ReadFile(goMod)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	t.Fatalf("%s does not require %s", goMod, path)
	return ""
}
