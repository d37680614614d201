package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/normalize"
	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Ownership labels and control annotations.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "flotilla"
	LabelUnit      = "flotilla.dev/unit"
	// AnnotationReconcile set to Disabled leaves an object alone: neither
	// applied nor pruned.
	AnnotationReconcile = "flotilla.dev/reconcile"
	// AnnotationPrune set to Disabled keeps an object when its unit stops
	// rendering it.
	AnnotationPrune = "flotilla.dev/prune"
	Disabled        = "disabled"

	DefaultFieldManager = "flotilla"
)

// Apply stages, in order.
const (
	stageDefinitions = iota // CRDs, Namespaces, ClusterRoles: applied and waited for first
	stageClasses            // cluster-wide *Class kinds: applied and waited for next
	stageResources          // everything else
	numStages
)

// desired is one object of the request, prepared for apply.
type desired struct {
	obj     *unstructured.Unstructured // a labelled, normalised copy
	id      object.ObjMetadata
	version string
	// contentHash identifies the prepared content; empty for Secrets.
	contentHash string
	// gitDisabled: the object in Git carries reconcile: disabled.
	gitDisabled bool
	stage       int
}

func (d *desired) subject() string { return subject(d.id.GroupKind.Kind, d.id.Namespace, d.id.Name) }

// validateUnitName: the unit name is a label value and part of the
// inventory ConfigMap name, so it must be a DNS-1123 label.
func validateUnitName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("%w: unit name %q: %s", ErrInvalid, name, strings.Join(errs, "; "))
	}
	return nil
}

// prepare copies, validates, normalises and labels the request's objects,
// resolving each kind's scope (from the cluster, or from a CRD of the same
// unit for kinds that do not exist yet). The caller's objects are not
// modified.
func prepare(unit string, objs []*unstructured.Unstructured, mapper meta.RESTMapper) ([]*desired, error) {
	crdScopes := map[schema.GroupKind]meta.RESTScopeName{}
	for _, o := range objs {
		if o != nil && utils.IsCRD(o) {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
			if scope == "Cluster" {
				crdScopes[schema.GroupKind{Group: group, Kind: kind}] = meta.RESTScopeNameRoot
			} else {
				crdScopes[schema.GroupKind{Group: group, Kind: kind}] = meta.RESTScopeNameNamespace
			}
		}
	}
	out := make([]*desired, 0, len(objs))
	seen := make(map[object.ObjMetadata]bool, len(objs))
	for i, o := range objs {
		if o == nil {
			return nil, fmt.Errorf("%w: object %d is nil", ErrInvalid, i)
		}
		gvk := o.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" || o.GetName() == "" {
			return nil, fmt.Errorf("%w: object %d (%s) has no apiVersion, kind or name", ErrInvalid, i, subject(gvk.Kind, o.GetNamespace(), o.GetName()))
		}
		obj := o.DeepCopy()
		scope, err := resolveScope(gvk, mapper, crdScopes)
		if err != nil {
			return nil, &ObjectError{Op: "resolve kind", Group: gvk.Group, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Class: ErrApply, Cause: err}
		}
		if scope == meta.RESTScopeNameRoot {
			obj.SetNamespace("")
		} else if obj.GetNamespace() == "" {
			return nil, fmt.Errorf("%w: %s is namespaced but has no namespace", ErrInvalid, subject(gvk.Kind, "", obj.GetName()))
		}
		// Typed round trip for native kinds, as Flux does: Secret
		// stringData becomes data, defaults that the API server would add
		// anyway are made explicit, status is dropped.
		if err := normalize.Unstructured(obj); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, subject(gvk.Kind, obj.GetNamespace(), obj.GetName()), err)
		}
		stripServerFields(obj)
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[LabelManagedBy] = ManagedByValue
		labels[LabelUnit] = unit
		obj.SetLabels(labels)

		d := &desired{
			obj:         obj,
			id:          object.UnstructuredToObjMetadata(obj),
			version:     gvk.Version,
			gitDisabled: strings.EqualFold(obj.GetAnnotations()[AnnotationReconcile], Disabled),
			stage:       stageOf(obj),
		}
		if seen[d.id] {
			return nil, fmt.Errorf("%w: %s appears twice", ErrInvalid, d.subject())
		}
		seen[d.id] = true
		if !isSecret(obj) {
			d.contentHash, err = contentHash(obj)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, d.subject(), err)
			}
		}
		out = append(out, d)
	}
	sortDesired(out)
	return out, nil
}

// stripServerFields removes metadata only the API server may set; applying
// a stale resourceVersion or uid from Git would fail or be ignored.
func stripServerFields(obj *unstructured.Unstructured) {
	for _, f := range []string{"resourceVersion", "uid", "managedFields", "generation", "selfLink", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
}

func resolveScope(gvk schema.GroupVersionKind, mapper meta.RESTMapper, crdScopes map[schema.GroupKind]meta.RESTScopeName) (meta.RESTScopeName, error) {
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return m.Scope.Name(), nil
	}
	if s, ok := crdScopes[gvk.GroupKind()]; ok && meta.IsNoMatchError(err) {
		return s, nil
	}
	return "", fmt.Errorf("unknown kind %s: %w", gvk, err)
}

func stageOf(obj *unstructured.Unstructured) int {
	switch {
	case utils.IsClusterDefinition(obj):
		return stageDefinitions
	case utils.IsClassDefinition(obj):
		return stageClasses
	}
	return stageResources
}

// sortDesired orders objects by stage, then ssa.ReconcileOrder, then
// namespace and name.
func sortDesired(ds []*desired) {
	sort.SliceStable(ds, func(i, j int) bool {
		if ds[i].stage != ds[j].stage {
			return ds[i].stage < ds[j].stage
		}
		return ssa.SortableMetas{ds[i].id, ds[j].id}.Less(0, 1)
	})
}

// contentHash is 64 bits of SHA-256 over the object's canonical JSON
// (encoding/json sorts map keys).
func contentHash(obj *unstructured.Unstructured) (string, error) {
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// fingerprint identifies manager's apply entry in managedFields: the set of
// fields it owns. Another manager taking over or removing one of those
// fields changes it; status updates and no-op applies do not. Empty when
// manager owns nothing.
func fingerprint(fields []metav1.ManagedFieldsEntry, manager string) string {
	for _, f := range fields {
		if f.Manager != manager || f.Operation != metav1.ManagedFieldsOperationApply || f.Subresource != "" || f.FieldsV1 == nil {
			continue
		}
		// The server's field order differs from encoding/json's; compare
		// canonical JSON so a GET and an apply response agree.
		var v any
		if err := json.Unmarshal(f.FieldsV1.GetRawBytes(), &v); err != nil {
			return ""
		}
		canon, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		h := sha256.New()
		h.Write([]byte(f.APIVersion))
		h.Write([]byte{0})
		h.Write(canon)
		return hex.EncodeToString(h.Sum(nil)[:8])
	}
	return ""
}

// ownedBy reports both ownership labels for unit.
func ownedBy(labels map[string]string, unit string) bool {
	return labels[LabelManagedBy] == ManagedByValue && labels[LabelUnit] == unit
}

func isDisabled(annotations map[string]string) bool {
	return strings.EqualFold(annotations[AnnotationReconcile], Disabled)
}
