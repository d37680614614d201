package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	agentcmd "github.com/flotilla-gitops/flotilla/agent/cmd"
	"github.com/flotilla-gitops/flotilla/hub/bootstrap"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// installRoot is the module root: manifests/ and the chart values under
// testdata/ are rendered from there, as a fleet repo's units would be.
func installRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	for dir := filepath.Dir(file); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("go.mod not found")
		}
	}
}

// renderKustomize builds a manifests/ directory with pkg/render, exactly as
// the agent builds a kustomize unit.
func renderKustomize(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	res, err := render.Unit(context.Background(), installRoot(t),
		slice.Unit{Name: "flotilla-agent", Kind: slice.UnitKustomize, Path: dir}, render.Options{})
	if err != nil {
		t.Fatalf("render %s: %v", dir, err)
	}
	return res.Objects
}

// renderChart templates manifests/chart with a values file, as the agent
// renders a helm unit, into the flotilla-system release namespace.
func renderChart(t testing.TB, values string) []*unstructured.Unstructured {
	t.Helper()
	res, err := render.Unit(context.Background(), installRoot(t), slice.Unit{
		Name: "flotilla-agent", Kind: slice.UnitHelm, Path: "test/e2e/testdata/chart-unit", Namespace: bootstrap.DefaultNamespace,
		Helm: &slice.HelmRelease{Chart: "manifests/chart", ReleaseName: "flotilla-agent", Values: values},
	}, render.Options{HelmInProcess: true})
	if err != nil {
		t.Fatalf("render the chart with %s: %v", values, err)
	}
	return res.Objects
}

// helmOnlyLabels are the labels a Helm chart conventionally adds and a
// Kustomize base does not; the only difference the comparison forgives.
var helmOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by"}

func byID(objs []*unstructured.Unstructured, dropHelmLabels bool) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		o = o.DeepCopy()
		if dropHelmLabels {
			labels := o.GetLabels()
			for _, l := range helmOnlyLabels {
				delete(labels, l)
			}
			o.SetLabels(labels)
		}
		out[objectID(o)] = o.Object
	}
	return out
}

func objectID(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	return fmt.Sprintf("%s/%s %s/%s", gvk.Group, gvk.Kind, o.GetNamespace(), o.GetName())
}

func ids(m map[string]map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestInstallKustomizeEqualsHelm: the chart renders the same objects as the
// Kustomize base and each overlay, given the equivalent values; only Helm's
// standard labels differ. Both go through pkg/render.
func TestInstallKustomizeEqualsHelm(t *testing.T) {
	cases := []struct {
		kustomize, values string
		wantKinds         map[string]int // a sanity floor: the comparison is not of two empty sets
	}{
		{"manifests/base", "test/e2e/testdata/chart-values/base.yaml",
			map[string]int{"Namespace": 1, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "ConfigMap": 1, "Secret": 3, "DaemonSet": 1, "Service": 1}},
		{"manifests/overlays/edge", "test/e2e/testdata/chart-values/edge.yaml",
			map[string]int{"Namespace": 1, "DaemonSet": 1, "ClusterRole": 1}},
		{"manifests/overlays/namespaced", "test/e2e/testdata/chart-values/namespaced.yaml",
			map[string]int{"ServiceAccount": 1, "ClusterRole": 1, "Role": 2, "RoleBinding": 2}},
		{"test/e2e/testdata/monitoring-install", "test/e2e/testdata/chart-values/monitoring.yaml",
			map[string]int{"ServiceMonitor": 1, "PrometheusRule": 1, "ConfigMap": 2, "DaemonSet": 1}},
	}
	for _, tc := range cases {
		t.Run(filepath.Base(tc.kustomize), func(t *testing.T) {
			kobjs := renderKustomize(t, tc.kustomize)
			hobjs := renderChart(t, tc.values)
			kinds := map[string]int{}
			for _, o := range kobjs {
				kinds[o.GetKind()]++
			}
			for kind, n := range tc.wantKinds {
				if kinds[kind] != n {
					t.Errorf("%s renders %d %s, want %d", tc.kustomize, kinds[kind], kind, n)
				}
			}
			k, h := byID(kobjs, false), byID(hobjs, true)
			if diff := cmp.Diff(ids(k), ids(h)); diff != "" {
				t.Fatalf("objects differ (-kustomize +helm):\n%s", diff)
			}
			for _, id := range ids(k) {
				if diff := cmp.Diff(k[id], h[id]); diff != "" {
					t.Errorf("%s differs (-kustomize +helm):\n%s", id, diff)
				}
			}
			for _, o := range hobjs {
				if o.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
					t.Errorf("helm %s lacks its managed-by label: the normalisation hides nothing else", objectID(o))
				}
			}
		})
	}
}

// TestInstallManifestsPinTheAgentImage: the base, the chart's appVersion and
// hub/bootstrap agree on the image, and the chart honours image values.
func TestInstallManifestsPinTheAgentImage(t *testing.T) {
	want := bootstrap.ImageRepository + ":" + bootstrap.ManifestsImageTag
	for _, o := range renderKustomize(t, "manifests/base") {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		if got := containerImage(t, o, "agent"); got != want {
			t.Errorf("base image %s, want %s", got, want)
		}
	}
	chart, err := os.ReadFile(filepath.Join(installRoot(t), "manifests/chart/Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.AppVersion != bootstrap.ManifestsImageTag {
		t.Errorf("chart appVersion %s, want %s", meta.AppVersion, bootstrap.ManifestsImageTag)
	}
}

func containerImage(t testing.TB, ds *unstructured.Unstructured, name string) string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	for _, c := range cs {
		m := c.(map[string]any)
		if m["name"] == name {
			return m["image"].(string)
		}
	}
	t.Fatalf("%s has no container %s", objectID(ds), name)
	return ""
}

// TestInstallSettingsAreAgentFlags: every FLOTILLA_* variable and every
// argument the manifests, the chart and hub/bootstrap give the agent names
// a real flotilla-agent flag. The agent ignores unknown variables, so a typo
// there would silently do nothing.
func TestInstallSettingsAreAgentFlags(t *testing.T) {
	flags := map[string]bool{}
	agentcmd.NewRootCommand().Flags().VisitAll(func(f *pflag.Flag) { flags[f.Name] = true })
	check := func(where, flag string) {
		t.Helper()
		if !flags[flag] {
			t.Errorf("%s: flotilla-agent has no flag --%s", where, flag)
		}
	}
	envFlag := func(env string) string {
		return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "FLOTILLA_"), "_", "-"))
	}
	argFlag := func(arg string) string {
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		return name
	}
	sources := map[string][]*unstructured.Unstructured{
		"manifests/base":  renderKustomize(t, "manifests/base"),
		"manifests/chart": renderChart(t, "test/e2e/testdata/chart-values/base.yaml"),
	}
	checked := 0
	for where, objs := range sources {
		for _, o := range objs {
			switch o.GetKind() {
			case "ConfigMap":
				data, _, _ := unstructured.NestedStringMap(o.Object, "data")
				for k := range data {
					check(where+" ConfigMap "+k, envFlag(k))
					checked++
				}
			case "DaemonSet":
				cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				for _, c := range cs {
					args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
					for _, a := range args {
						check(where+" DaemonSet argument "+a, argFlag(a))
						checked++
					}
					env, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
					for _, e := range env {
						if name := e.(map[string]any)["name"].(string); strings.HasPrefix(name, "FLOTILLA_") {
							check(where+" DaemonSet env "+name, envFlag(name))
							checked++
						}
					}
				}
			}
		}
	}
	opts := bootstrap.InstallOptions{Cluster: "member1", RepoURL: "https://git.example.com/fleet.git", Interval: 30 * time.Second}
	settings, err := opts.Settings()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		check("bootstrap setting "+s.Env(), envFlag(s.Env()))
		check("bootstrap setting "+s.Arg(), argFlag(s.Arg()))
		checked += 2
	}
	args, err := opts.LocalAgentArgs(bootstrap.LocalAgent{Kubeconfig: "kc", CacheDir: "cache", CredentialsDir: "creds", Identity: "me"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range args {
		check("bootstrap local agent argument "+a, argFlag(a))
		checked++
	}
	if checked < 30 {
		t.Errorf("only %d settings checked: the manifests lost their settings?", checked)
	}
}

// TestInstallNamespacedOverlayGrantsNoClusterWrites: the namespaced
// overlay (and the chart's rbac.scope=namespaced) keeps no ClusterRole that
// writes or has a wildcard; its cluster-wide grant is the capacity report's
// reads; every namespaced grant is in the agent's own namespace or a listed
// app namespace, bound to the agent's ServiceAccount.
func TestInstallNamespacedOverlayGrantsNoClusterWrites(t *testing.T) {
	for name, objs := range map[string][]*unstructured.Unstructured{
		"kustomize": renderKustomize(t, "manifests/overlays/namespaced"),
		"chart":     renderChart(t, "test/e2e/testdata/chart-values/namespaced.yaml"),
	} {
		t.Run(name, func(t *testing.T) {
			roles := map[string]bool{}
			for _, o := range objs {
				switch o.GetKind() {
				case "ClusterRole":
					roles[o.GetName()] = true
					rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
					if len(rules) == 0 {
						t.Errorf("ClusterRole %s has no rules", o.GetName())
					}
					for _, r := range rules {
						rule := r.(map[string]any)
						for _, field := range []string{"apiGroups", "resources", "verbs", "nonResourceURLs"} {
							vals, _, _ := unstructured.NestedStringSlice(rule, field)
							for _, v := range vals {
								if v == "*" {
									t.Errorf("ClusterRole %s: %s %q", o.GetName(), field, v)
								}
								if field == "verbs" && !slices.Contains([]string{"get", "list", "watch"}, v) {
									t.Errorf("ClusterRole %s grants %q: only reads are cluster-wide", o.GetName(), v)
								}
							}
						}
					}
				case "ClusterRoleBinding":
					ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
					if ref != "flotilla-agent-capacity" {
						t.Errorf("ClusterRoleBinding %s binds %s", o.GetName(), ref)
					}
				case "Role", "RoleBinding":
					if ns := o.GetNamespace(); ns != bootstrap.DefaultNamespace && ns != "team-a" {
						t.Errorf("%s %s in namespace %s", o.GetKind(), o.GetName(), ns)
					}
				}
				if o.GetKind() == "RoleBinding" || o.GetKind() == "ClusterRoleBinding" {
					subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
					for _, s := range subjects {
						s := s.(map[string]any)
						if s["kind"] != "ServiceAccount" || s["name"] != "flotilla-agent" || s["namespace"] != bootstrap.DefaultNamespace {
							t.Errorf("%s %s binds %v, want only the agent's ServiceAccount", o.GetKind(), o.GetName(), s)
						}
					}
				}
			}
			if !roles["flotilla-agent-capacity"] || len(roles) != 1 {
				t.Errorf("ClusterRoles %v, want only flotilla-agent-capacity", roles)
			}
		})
	}
}
