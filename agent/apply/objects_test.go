package apply

import (
	"errors"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// staticMapper knows the handful of kinds these tests use, with their real
// scopes.
func staticMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gvk   schema.GroupVersionKind
		scope meta.RESTScope
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, meta.RESTScopeRoot},
	} {
		m.Add(k.gvk, k.scope)
	}
	return m
}

func obj(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name}}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u
}

func crd(group, kind, scope string) *unstructured.Unstructured {
	u := obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", strings.ToLower(kind)+"s."+group)
	u.Object["spec"] = map[string]any{"group": group, "scope": scope, "names": map[string]any{"kind": kind}}
	return u
}

func TestPrepareOrdersLabelsAndScopes(t *testing.T) {
	widget := obj("example.com/v1", "Widget", "apps", "w")
	gadget := obj("example.com/v1", "Gadget", "apps", "g") // cluster-scoped by its CRD: namespace dropped
	ns := obj("v1", "Namespace", "ignored", "apps")
	in := []*unstructured.Unstructured{
		obj("apps/v1", "Deployment", "apps", "web"),
		widget, gadget,
		obj("storage.k8s.io/v1", "StorageClass", "", "fast"),
		obj("v1", "Service", "apps", "web"),
		ns,
		crd("example.com", "Widget", "Namespaced"),
		crd("example.com", "Gadget", "Cluster"),
	}
	ds, err := prepare("web", in, staticMapper())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.subject())
		if !ownedBy(d.obj.GetLabels(), "web") {
			t.Errorf("%s lacks ownership labels", d.subject())
		}
	}
	want := []string{
		"CustomResourceDefinition/gadgets.example.com", "CustomResourceDefinition/widgets.example.com", "Namespace/apps",
		"StorageClass/fast",
		"Service/apps/web", "Deployment/apps/web", "Gadget/g", "Widget/apps/w",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("order\n got %v\nwant %v", got, want)
	}
	if ns.GetNamespace() != "ignored" || len(ns.GetLabels()) != 0 {
		t.Fatal("prepare modified the caller's object")
	}
	if ds[0].stage != stageDefinitions || ds[3].stage != stageClasses || ds[4].stage != stageResources {
		t.Fatalf("stages: %d %d %d", ds[0].stage, ds[3].stage, ds[4].stage)
	}
}

func TestPrepareRejects(t *testing.T) {
	noName := obj("v1", "ConfigMap", "a", "")
	tests := []struct {
		name  string
		objs  []*unstructured.Unstructured
		class error
	}{
		{"nil", []*unstructured.Unstructured{nil}, ErrInvalid},
		{"no name", []*unstructured.Unstructured{noName}, ErrInvalid},
		{"no kind", []*unstructured.Unstructured{{Object: map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": "x"}}}}, ErrInvalid},
		{"namespaced without namespace", []*unstructured.Unstructured{obj("v1", "ConfigMap", "", "x")}, ErrInvalid},
		{"duplicate", []*unstructured.Unstructured{obj("v1", "ConfigMap", "a", "x"), obj("v1", "ConfigMap", "a", "x")}, ErrInvalid},
		{"unknown kind", []*unstructured.Unstructured{obj("example.com/v1", "Nope", "a", "x")}, ErrApply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := prepare("u", tt.objs, staticMapper())
			if !errors.Is(err, tt.class) {
				t.Fatalf("got %v, want %v", err, tt.class)
			}
		})
	}
}

func TestPrepareHashesAndDisabled(t *testing.T) {
	cm := obj("v1", "ConfigMap", "a", "x")
	cm.Object["data"] = map[string]any{"k": "v"}
	off := obj("v1", "ConfigMap", "a", "off")
	off.SetAnnotations(map[string]string{AnnotationReconcile: "Disabled"})
	sec := obj("v1", "Secret", "a", "s")
	sec.Object["stringData"] = map[string]any{"password": "p"}
	ds, err := prepare("u", []*unstructured.Unstructured{cm, off, sec}, staticMapper())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*desired{}
	for _, d := range ds {
		byName[d.id.Name] = d
	}
	if len(byName["x"].contentHash) != 16 || byName["s"].contentHash != "" {
		t.Fatalf("content hashes: %q %q", byName["x"].contentHash, byName["s"].contentHash)
	}
	if !byName["off"].gitDisabled || byName["x"].gitDisabled {
		t.Fatal("reconcile: disabled not recognised")
	}
	if _, ok := byName["s"].obj.Object["stringData"]; ok {
		t.Fatal("Secret stringData should be normalised into data")
	}
	again, _ := prepare("u", []*unstructured.Unstructured{cm, off, sec}, staticMapper())
	if again[0].contentHash != ds[0].contentHash {
		t.Fatal("content hash not deterministic")
	}
	other, _ := prepare("v", []*unstructured.Unstructured{cm}, staticMapper())
	if other[0].contentHash == byName["x"].contentHash {
		t.Fatal("content hash must cover the unit label")
	}
}

func TestValidateUnitName(t *testing.T) {
	for name, ok := range map[string]bool{
		"web": true, "flotilla-namespaces": true, "job-train-7": true,
		"": false, "Web": false, "a_b": false, "a.b": false, strings.Repeat("a", 64): false,
	} {
		if err := validateUnitName(name); (err == nil) != ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%q: %v", name, err)
		}
	}
}

func TestFingerprint(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, sub, raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: sub, APIVersion: "v1", FieldsV1: metav1.NewFieldsV1(raw)}
	}
	a := `{"f:data":{"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{}}}`
	reordered := `{"f:metadata":{"f:labels":{}},"f:data":{"f:b":{},"f:a":{}}}`
	shrunk := `{"f:data":{"f:b":{}},"f:metadata":{"f:labels":{}}}`
	fp := fingerprint([]metav1.ManagedFieldsEntry{entry("kubectl", metav1.ManagedFieldsOperationUpdate, "", shrunk), entry("flotilla", metav1.ManagedFieldsOperationApply, "", a)}, "flotilla")
	if fp == "" {
		t.Fatal("no fingerprint")
	}
	if got := fingerprint([]metav1.ManagedFieldsEntry{entry("flotilla", metav1.ManagedFieldsOperationApply, "", reordered)}, "flotilla"); got != fp {
		t.Fatal("key order must not matter")
	}
	if got := fingerprint([]metav1.ManagedFieldsEntry{entry("flotilla", metav1.ManagedFieldsOperationApply, "", shrunk)}, "flotilla"); got == fp {
		t.Fatal("a field taken over must change the fingerprint")
	}
	for _, e := range []metav1.ManagedFieldsEntry{
		entry("flotilla", metav1.ManagedFieldsOperationUpdate, "", a),
		entry("flotilla", metav1.ManagedFieldsOperationApply, "status", a),
		entry("other", metav1.ManagedFieldsOperationApply, "", a),
	} {
		if got := fingerprint([]metav1.ManagedFieldsEntry{e}, "flotilla"); got != "" {
			t.Fatalf("entry %+v should not count", e)
		}
	}
}

func TestSortEntriesMatchesIDs(t *testing.T) {
	es := []Entry{
		{ID: object.ObjMetadata{Name: "b", Namespace: "x", GroupKind: schema.GroupKind{Kind: "Service"}}, Version: "v1"},
		{ID: object.ObjMetadata{Name: "a", Namespace: "x", GroupKind: schema.GroupKind{Kind: "Service"}}, Version: "v1"},
		{ID: object.ObjMetadata{Name: "a", GroupKind: schema.GroupKind{Group: "apps", Kind: "Deployment"}}, Version: "v1"},
	}
	sortEntries(es)
	if es[0].ID.Name != "a" || es[0].ID.GroupKind.Kind != "Service" || es[2].ID.GroupKind.Group != "apps" {
		t.Fatalf("order: %+v", es)
	}
}
