package render

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// A kind's scope (namespaced or cluster-scoped) decides whether a unit's
// namespace may be set on its objects. It is looked up, first to last, in
// the cluster's discovery (Capabilities.Namespaced: the agent), the
// CustomResourceDefinitions the unit renders itself, the kinds built into
// Kubernetes, and the custom kinds Flotilla generates. A kind found in none of them has an unknown scope: it is
// treated as namespaced, as kustomize does, and listed in
// Result.UnknownScope so that plan says so instead of guessing silently.

// clusterScopedBuiltins are the built-in kinds Kubernetes serves without a
// namespace. Scope never changes between versions of a kind, so group and
// kind are enough. The list covers current Kubernetes, including kinds
// newer than kustomize's built-in schema (v1.21), which would otherwise be
// given a namespace.
var clusterScopedBuiltins = map[schema.GroupKind]bool{}

// namespacedBuiltins are every other kind of the built-in API groups
// (client-go's scheme).
var namespacedBuiltins = map[schema.GroupKind]bool{}

// generatedKinds are the custom kinds Flotilla itself renders (Volcano
// queues and jobs, TrafficRoute's Istio objects), whose CRDs a cluster gets
// from their projects' installs rather than from the fleet.
var generatedKinds = map[schema.GroupKind]bool{
	{Group: "scheduling.volcano.sh", Kind: "Queue"}:         false,
	{Group: "scheduling.volcano.sh", Kind: "PodGroup"}:      true,
	{Group: "batch.volcano.sh", Kind: "Job"}:                true,
	{Group: "networking.istio.io", Kind: "VirtualService"}:  true,
	{Group: "networking.istio.io", Kind: "DestinationRule"}: true,
}

func init() {
	for group, kinds := range map[string][]string{
		"":                             {"Namespace", "Node", "PersistentVolume", "ComponentStatus"},
		"rbac.authorization.k8s.io":    {"ClusterRole", "ClusterRoleBinding"},
		"apiextensions.k8s.io":         {"CustomResourceDefinition"},
		"apiregistration.k8s.io":       {"APIService"},
		"admissionregistration.k8s.io": {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
		"scheduling.k8s.io":            {"PriorityClass"},
		"storage.k8s.io":               {"StorageClass", "VolumeAttachment", "CSIDriver", "CSINode", "VolumeAttributesClass"},
		"networking.k8s.io":            {"IngressClass", "IPAddress", "ServiceCIDR"},
		"node.k8s.io":                  {"RuntimeClass"},
		"certificates.k8s.io":          {"CertificateSigningRequest", "ClusterTrustBundle"},
		"flowcontrol.apiserver.k8s.io": {"FlowSchema", "PriorityLevelConfiguration"},
		"policy":                       {"PodSecurityPolicy"},
		"resource.k8s.io":              {"DeviceClass", "ResourceSlice", "DeviceTaintRule"},
		"authentication.k8s.io":        {"TokenReview", "SelfSubjectReview"},
		"authorization.k8s.io":         {"SubjectAccessReview", "SelfSubjectAccessReview", "SelfSubjectRulesReview"},
		"storagemigration.k8s.io":      {"StorageVersionMigration"},
		"internal.apiserver.k8s.io":    {"StorageVersion"},
	} {
		for _, k := range kinds {
			clusterScopedBuiltins[schema.GroupKind{Group: group, Kind: k}] = true
		}
	}
	for gvk := range scheme.Scheme.AllKnownTypes() {
		gk := gvk.GroupKind()
		if strings.HasSuffix(gk.Kind, "List") || strings.HasSuffix(gk.Kind, "Options") || gk.Kind == "WatchEvent" || gk.Kind == "Status" {
			continue
		}
		if !clusterScopedBuiltins[gk] {
			namespacedBuiltins[gk] = true
		}
	}
}

// scopes answers a kind's scope for one render.
type scopes struct {
	cluster map[schema.GroupKind]bool // Capabilities.Namespaced
	unit    map[schema.GroupKind]bool // the unit's own CRDs
}

func newScopes(caps Capabilities, m resmap.ResMap) *scopes {
	s := &scopes{cluster: caps.Namespaced, unit: map[schema.GroupKind]bool{}}
	for _, r := range m.Resources() {
		if r.GetKind() != "CustomResourceDefinition" {
			continue
		}
		obj, err := r.Map()
		if err != nil {
			continue
		}
		if gk, namespaced, ok := CRDScope(&unstructured.Unstructured{Object: obj}); ok {
			s.unit[gk] = namespaced
		}
	}
	return s
}

// namespaced reports whether gk is namespaced, and whether its scope is
// known at all.
func (s *scopes) namespaced(gk schema.GroupKind) (namespaced, known bool) {
	if n, ok := s.cluster[gk]; ok {
		return n, true
	}
	if n, ok := s.unit[gk]; ok {
		return n, true
	}
	if clusterScopedBuiltins[gk] {
		return false, true
	}
	if n, ok := generatedKinds[gk]; ok {
		return n, true
	}
	if namespacedBuiltins[gk] {
		return true, true
	}
	return true, false
}

// CRDScope reads the kind a CustomResourceDefinition defines and its scope;
// ok is false for any other object, or a CRD without group, kind or a valid
// scope.
func CRDScope(o *unstructured.Unstructured) (gk schema.GroupKind, namespaced, ok bool) {
	if o.GetKind() != "CustomResourceDefinition" || o.GroupVersionKind().Group != "apiextensions.k8s.io" {
		return gk, false, false
	}
	group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
	scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
	if kind == "" || (scope != "Namespaced" && scope != "Cluster") {
		return gk, false, false
	}
	return schema.GroupKind{Group: group, Kind: kind}, scope == "Namespaced", true
}

// placeNamespaces gives krusty's objects the namespace the cluster will
// hold them in, and returns the kinds whose scope it had to assume
// ("Kind.group", sorted).
//
// A cluster-scoped object never has a namespace: the API server drops one
// sent with it, so Flotilla tracks the object as the cluster holds it. For
// a helm unit (fill), ns fills only namespaced objects that have none, as
// `helm install --namespace` does; an object the chart put in another
// namespace stays there. For other units, kustomize's `namespace:` has
// already run, and RoleBinding subjects that are not ServiceAccounts lose
// their namespace: kustomize sets one on every subject named "default",
// and only a ServiceAccount subject has one.
func placeNamespaces(m resmap.ResMap, sc *scopes, ns string, fill bool) ([]string, error) {
	var unknown []string
	for _, r := range m.Resources() {
		gvk := r.GetGvk()
		gk := schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}
		namespaced, known := sc.namespaced(gk)
		if !known && !slices.Contains(unknown, gk.String()) {
			unknown = append(unknown, gk.String())
		}
		var err error
		switch {
		case !namespaced && r.GetNamespace() != "":
			err = r.PipeE(yaml.Lookup("metadata"), yaml.Clear("namespace"))
		case namespaced && fill && r.GetNamespace() == "":
			err = r.SetNamespace(ns)
		}
		if err == nil && !fill && isRoleBindingKind(gk) {
			err = clearNonServiceAccountSubjects(&r.RNode)
		}
		if err != nil {
			return nil, classed(ErrInvalidObject, fmt.Sprintf("object %s: namespace: %v", r.CurId(), err))
		}
	}
	slices.Sort(unknown)
	return unknown, nil
}

func isRoleBindingKind(gk schema.GroupKind) bool {
	return gk.Group == "rbac.authorization.k8s.io" && (gk.Kind == "RoleBinding" || gk.Kind == "ClusterRoleBinding")
}

// clearNonServiceAccountSubjects removes the namespace of every subject
// that is not a ServiceAccount.
func clearNonServiceAccountSubjects(rn *yaml.RNode) error {
	subjects, err := rn.Pipe(yaml.Lookup("subjects"))
	if err != nil || subjects == nil || subjects.YNode().Kind != yaml.SequenceNode {
		return err
	}
	return subjects.VisitElements(func(s *yaml.RNode) error {
		if kind, _ := s.GetString("kind"); kind == "ServiceAccount" {
			return nil
		}
		return s.PipeE(yaml.Clear("namespace"))
	})
}
