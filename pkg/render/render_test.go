package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/golden"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

func TestMain(m *testing.M) {
	// Helm units render in worker processes re-executing this test binary.
	ServeWorkerIfRequested()
	renderAloneIfRequested()
	os.Exit(m.Run())
}

const fixtureRepo = "testdata/repo"

func unitAt(name string, kind slice.UnitKind, dir string) slice.Unit {
	return slice.Unit{Name: name, Kind: kind, Path: dir, Timeout: metav1.Duration{Duration: time.Minute}}
}

func helmUnit(name, dir, chart, namespace string) slice.Unit {
	u := unitAt(name, slice.UnitHelm, dir)
	u.Namespace = namespace
	u.Helm = &slice.HelmRelease{Chart: chart, ReleaseName: name, Values: dir + "/values.yaml"}
	return u
}

func TestUnitGolden(t *testing.T) {
	caps := Capabilities{KubeVersion: "v1.31.4", APIVersions: []string{"monitoring.coreos.com/v1"}}
	tests := []struct {
		name   string
		unit   slice.Unit
		opts   Options
		checks func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{
			name: "kustomize-patch",
			unit: func() slice.Unit {
				u := unitAt("nginx", slice.UnitKustomize, "rendered/ab/member1/nginx")
				u.Namespace = "web"
				return u
			}(),
			checks: func(t *testing.T, objs []*unstructured.Unstructured) {
				d := find(t, objs, "Deployment", "nginx")
				wantInt(t, d, 3, "spec", "replicas")
				wantString(t, d, "member1", "metadata", "annotations", "flotilla.dev/cluster")
				wantString(t, d, "web", "metadata", "namespace")
				wantString(t, d, "nginx", "spec", "selector", "matchLabels", "app.kubernetes.io/name")
			},
		},
		{
			name: "manifests",
			unit: unitAt("collector", slice.UnitManifests, "rendered/ab/member1/plain"),
			checks: func(t *testing.T, objs []*unstructured.Unstructured) {
				// Apply order, not file order: ServiceAccount, ConfigMap, Service, Deployment.
				wantKinds(t, objs, "ServiceAccount", "ConfigMap", "Service", "Deployment")
				wantString(t, find(t, objs, "Service", "collector"), "iot", "metadata", "namespace")
			},
		},
		{
			name: "helm-capabilities",
			unit: helmUnit("caps", "rendered/ab/member1/caps", "charts/caps/0.1.0", "monitoring"),
			opts: Options{Capabilities: caps},
			checks: func(t *testing.T, objs []*unstructured.Unstructured) {
				cm := find(t, objs, "ConfigMap", "caps-caps")
				wantString(t, cm, "modern", "data", "featureSet")
				wantString(t, cm, "v1.31.4", "data", "kubeVersion")
				wantString(t, cm, "hello from member1", "data", "greeting")
				wantString(t, cm, "monitoring", "data", "releaseNamespace")
				wantString(t, cm, "monitoring", "metadata", "namespace")
				find(t, objs, "ServiceMonitor", "caps")
				crd := find(t, objs, "CustomResourceDefinition", "widgets.example.com")
				if crd.GetNamespace() != "" {
					t.Errorf("cluster-scoped CRD got namespace %q", crd.GetNamespace())
				}
				for _, o := range objs {
					if o.GetKind() == "Pod" {
						t.Errorf("test hook %s rendered", o.GetName())
					}
				}
			},
		},
		{
			name: "helm-default-capabilities",
			unit: helmUnit("caps", "rendered/ab/member1/caps", "charts/caps/0.1.0", "monitoring"),
			opts: Options{Capabilities: Capabilities{KubeVersion: "v1.28.0"}},
			checks: func(t *testing.T, objs []*unstructured.Unstructured) {
				wantString(t, find(t, objs, "ConfigMap", "caps-caps"), "legacy", "data", "featureSet")
				for _, o := range objs {
					if o.GetKind() == "ServiceMonitor" {
						t.Error("ServiceMonitor rendered without monitoring.coreos.com/v1 in capabilities")
					}
				}
			},
		},
		{
			name: "helm-overrides",
			unit: helmUnit("frontend-web", "rendered/ab/member1/web", "charts/web/1.0.0", "web"),
			checks: func(t *testing.T, objs []*unstructured.Unstructured) {
				d := find(t, objs, "Deployment", "frontend-web")
				wantInt(t, d, 5, "spec", "replicas") // kustomize replicas beat values' 2
				containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
				if img := containers[0].(map[string]any)["image"]; img != "registry.example.com/mirror/nginx:1.27" {
					t.Errorf("image = %v", img)
				}
				svc := find(t, objs, "Service", "frontend-web")
				ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
				if p := ports[0].(map[string]any)["port"]; p != int64(8080) {
					t.Errorf("service port = %v (%T), want 8080 from the unit's values", p, p)
				}
				wantString(t, svc, "web", "metadata", "namespace")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Unit(context.Background(), fixtureRepo, tc.unit, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			tc.checks(t, res.Objects)
			got, err := res.YAML()
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			for _, o := range res.Objects {
				b, _ := o.MarshalJSON()
				total += int64(len(b))
			}
			for _, h := range res.Hooks {
				b, _ := h.Object.MarshalJSON()
				total += int64(len(b))
			}
			// Size counts krusty's JSON encoding, which differs from
			// encoding/json's only in escaping details.
			if diff := res.Size - total; res.Size <= 0 || diff > total/100+8 || -diff > total/100+8 {
				t.Errorf("Size = %d, objects marshal to %d bytes", res.Size, total)
			}
			golden.Assert(t, filepath.Join("testdata", "golden", tc.name+".yaml"), got)

			// Rendering is deterministic.
			again, err := Unit(context.Background(), fixtureRepo, tc.unit, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := again.YAML(); string(b) != string(got) {
				t.Error("second render differs from the first")
			}
		})
	}
}

// TestHelmHooks: hooks are set apart from the objects with Helm's events,
// weight and delete policies; test hooks are dropped.
func TestHelmHooks(t *testing.T) {
	u := helmUnit("caps", "rendered/ab/member1/caps", "charts/caps/0.1.0", "monitoring")
	res, err := Unit(context.Background(), fixtureRepo, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		if _, ok := o.GetAnnotations()["helm.sh/hook"]; ok {
			t.Errorf("hook %s %s among the objects", o.GetKind(), o.GetName())
		}
	}
	var got []string
	for _, h := range res.Hooks {
		got = append(got, fmt.Sprintf("%s %s/%s events=%v weight=%d delete=%v", h.Object.GetKind(), h.Object.GetNamespace(), h.Object.GetName(), h.Events, h.Weight, h.DeletePolicies))
	}
	want := []string{"Job monitoring/caps-migrate events=[pre-install pre-upgrade] weight=-5 delete=[before-hook-creation]"}
	if !slices.Equal(got, want) {
		t.Errorf("hooks = %q, want %q", got, want)
	}
}

// TestSplitHooks: annotation parsing, and Helm's order (weight, then name,
// then kind; TestHookOrderIsHelms checks it against Helm itself).
func TestSplitHooks(t *testing.T) {
	obj := func(kind, name string, ann map[string]string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name, "namespace": "ns"}}}
		o.SetAnnotations(ann)
		return o
	}
	objs := []*unstructured.Unstructured{
		obj("ConfigMap", "plain", nil),
		obj("ConfigMap", "late", map[string]string{"helm.sh/hook": "post-upgrade", "helm.sh/hook-weight": "10"}),
		obj("Job", "b-migrate", map[string]string{"helm.sh/hook": " Pre-Install , pre-upgrade", "helm.sh/hook-delete-policy": "hook-succeeded, hook-failed"}),
		obj("ServiceAccount", "a-sa", map[string]string{"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "junk"}),
		obj("Job", "first", map[string]string{"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "-1"}),
		obj("Pod", "tester", map[string]string{"helm.sh/hook": "test"}),
	}
	sortObjects(objs)
	kept, hooks, err := splitHooks(objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 1 || kept[0].GetName() != "plain" {
		t.Errorf("kept %d objects, want only plain", len(kept))
	}
	var got []string
	for _, h := range hooks {
		got = append(got, fmt.Sprintf("%s %v %d %v", h.Object.GetName(), h.Events, h.Weight, h.DeletePolicies))
	}
	want := []string{
		"first [pre-install] -1 [before-hook-creation]",
		"a-sa [pre-install] 0 [before-hook-creation]",
		"b-migrate [pre-install pre-upgrade] 0 [hook-succeeded hook-failed]",
		"late [post-upgrade] 10 [before-hook-creation]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("hooks =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, _, err := splitHooks([]*unstructured.Unstructured{obj("Job", "x", map[string]string{"helm.sh/hook": "pre-instal"})}); !errors.Is(err, ErrInvalidObject) {
		t.Errorf("unknown event: err = %v, want ErrInvalidObject", err)
	}
}

// TestHelmInProcessMatchesWorker: both execution paths produce the same objects.
func TestHelmInProcessMatchesWorker(t *testing.T) {
	u := helmUnit("frontend-web", "rendered/ab/member1/web", "charts/web/1.0.0", "web")
	viaWorker, err := Unit(context.Background(), fixtureRepo, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	inProcess, err := Unit(context.Background(), fixtureRepo, u, Options{HelmInProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := viaWorker.YAML()
	b, _ := inProcess.YAML()
	if string(a) != string(b) {
		t.Errorf("worker and in-process renders differ:\n%s\n---\n%s", a, b)
	}
}

// TestSymlinkInsideRepo: links that stay inside the repository are followed.
func TestSymlinkInsideRepo(t *testing.T) {
	root := writeTree(t, map[string]string{
		"apps/real/kustomization.yaml": "resources: [cm.yaml]\n",
		"apps/real/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: linked\n",
		"unit/kustomization.yaml":      "resources: [../apps/alias, extra.yaml, ../apps/shared]\n",
		"data/extra.yaml":              "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n",
		// Relative references resolve against the base's real location.
		"lib/base/kustomization.yaml": "resources: [../common/cm.yaml]\n",
		"lib/common/cm.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: common\n",
	})
	symlink(t, "real", filepath.Join(root, "apps/alias"))
	symlink(t, "../lib/base", filepath.Join(root, "apps/shared"))
	symlink(t, "../data/extra.yaml", filepath.Join(root, "unit/extra.yaml"))
	res, err := Unit(context.Background(), root, unitAt("u", slice.UnitKustomize, "unit"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	find(t, res.Objects, "ConfigMap", "linked")
	find(t, res.Objects, "ConfigMap", "extra")
	find(t, res.Objects, "ConfigMap", "common")
}

// TestBuiltinTransformerAllowed: builtin plugin configurations still work.
func TestBuiltinTransformerAllowed(t *testing.T) {
	root := writeTree(t, map[string]string{
		"unit/kustomization.yaml": "resources: [cm.yaml]\ntransformers: [prefix.yaml]\n",
		"unit/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		"unit/prefix.yaml":        "apiVersion: builtin\nkind: PrefixSuffixTransformer\nmetadata:\n  name: p\nprefix: member1-\nfieldSpecs:\n- path: metadata/name\n",
	})
	res, err := Unit(context.Background(), root, unitAt("u", slice.UnitKustomize, "unit"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	find(t, res.Objects, "ConfigMap", "member1-cm")
}

// TestHelmUnitNamespaceWithoutKustomization: the generated kustomization
// sets the unit namespace on namespaced objects only.
func TestHelmUnitNamespaceWithoutKustomization(t *testing.T) {
	res, err := Unit(context.Background(), fixtureRepo, helmUnit("caps", "rendered/ab/member1/caps", "charts/caps/0.1.0", "monitoring"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			if o.GetNamespace() != "" {
				t.Errorf("%s got a namespace", o.GetName())
			}
		default:
			if o.GetNamespace() != "monitoring" {
				t.Errorf("%s %s namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
			}
		}
	}
}

// --- helpers ---

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %d objects", kind, name, len(objs))
	return nil
}

func wantString(t *testing.T, o *unstructured.Unstructured, want string, fields ...string) {
	t.Helper()
	got, _, _ := unstructured.NestedString(o.Object, fields...)
	if got != want {
		t.Errorf("%s %s: %s = %q, want %q", o.GetKind(), o.GetName(), strings.Join(fields, "."), got, want)
	}
}

func wantInt(t *testing.T, o *unstructured.Unstructured, want int64, fields ...string) {
	t.Helper()
	got, _, _ := unstructured.NestedInt64(o.Object, fields...)
	if got != want {
		t.Errorf("%s %s: %s = %d, want %d", o.GetKind(), o.GetName(), strings.Join(fields, "."), got, want)
	}
}

func wantKinds(t *testing.T, objs []*unstructured.Unstructured, kinds ...string) {
	t.Helper()
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind())
	}
	if strings.Join(got, ",") != strings.Join(kinds, ",") {
		t.Errorf("kinds = %v, want %v", got, kinds)
	}
}

// writeTree creates files (slash-separated paths) under a new repo root.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	treefile.Write(t, root, files)
	return root
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
