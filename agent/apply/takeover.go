package apply

// Taking over fields that imperative edits (kubectl patch, edit, scale,
// client-side apply) own, so that the next apply restores what Git says.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultTakeOver are the field managers whose fields Apply takes over,
// the ones Flux's kustomize-controller cleans up: kubectl's server-side
// apply ("kubectl", Apply) and every kubectl command that updates
// ("kubectl-patch", "kubectl-edit", "kubectl-client-side-apply",
// "kubectl-set", "kubectl-rollout", …: prefix "kubectl", Update), and
// "before-first-apply" (fields kubectl client-side apply set before a
// server-side apply upgraded them). As with Flux, the restartedAt
// annotation `kubectl rollout restart` puts in a pod template is spec,
// so it is undone (a second rollout); restart through Git instead.
var DefaultTakeOver = []ssa.FieldManager{
	{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationApply},
	{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationUpdate},
	{Name: "before-first-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
}

// ParseFieldManager reads "name:Operation" (Operation Apply or Update,
// any case) as a prefix-matching ssa.FieldManager, or
// "=name:Operation" as an exact one.
func ParseFieldManager(s string) (ssa.FieldManager, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return ssa.FieldManager{}, fmt.Errorf("%w: field manager %q: want name:Apply or name:Update", ErrInvalid, s)
	}
	m := ssa.FieldManager{Name: s[:i]}
	if rest, ok := strings.CutPrefix(m.Name, "="); ok {
		m.Name, m.ExactMatch = rest, true
	}
	switch op := s[i+1:]; {
	case strings.EqualFold(op, string(metav1.ManagedFieldsOperationApply)):
		m.OperationType = metav1.ManagedFieldsOperationApply
	case strings.EqualFold(op, string(metav1.ManagedFieldsOperationUpdate)):
		m.OperationType = metav1.ManagedFieldsOperationUpdate
	default:
		return ssa.FieldManager{}, fmt.Errorf("%w: field manager %q: operation %q is neither Apply nor Update", ErrInvalid, s, op)
	}
	if m.Name == "" {
		return ssa.FieldManager{}, fmt.Errorf("%w: field manager %q: empty name", ErrInvalid, s)
	}
	return m, nil
}

// replaceManager is the field manager of replace's update; its fields are
// always taken over, so that flotilla's apply entry owns them again.
const replaceManager = "flotilla-replace"

// takeOverMatch reports whether entry belongs to a manager to take over.
// Like ssa's cleanup it leaves subresource entries (status, and scale,
// whose fields a forced apply takes back anyway) alone.
func (a *Applier) takeOverMatch(entry metav1.ManagedFieldsEntry) bool {
	if entry.Subresource != "" || entry.Manager == a.opts.FieldManager {
		return false
	}
	if entry.Manager == replaceManager && entry.Operation == metav1.ManagedFieldsOperationUpdate {
		return true
	}
	for _, m := range a.opts.TakeOver {
		if entry.Operation != m.OperationType {
			continue
		}
		if m.ExactMatch && entry.Manager == m.Name || !m.ExactMatch && strings.HasPrefix(entry.Manager, m.Name) {
			return true
		}
	}
	return false
}

// foreignFields reports whether a manager to take over owns fields of
// the object outside its metadata: that is drift even when flotilla's own
// fields are intact (an env var or port added by kubectl edit).
func (a *Applier) foreignFields(fields []metav1.ManagedFieldsEntry) bool {
	for _, f := range fields {
		if !a.takeOverMatch(f) {
			continue
		}
		if _, rest, err := splitMetadata(f.FieldsV1); err != nil || rest != nil {
			return true
		}
	}
	return false
}

// takeOver moves the fields that managers to take over own outside
// metadata into flotilla's apply entry (as ssa.PatchReplaceFieldsManagers,
// Flux's cleanup, does), so the next apply removes what they added and
// replaces what they changed, list items whose key they changed included.
// Labels and annotations they set stay theirs: an operator's label, or
// flotilla.dev/prune: disabled set by hand, is not someone's drift. Only
// managedFields change. It reports whether it patched the object; one
// that is gone or disabled is left alone.
func (a *Applier) takeOver(ctx context.Context, d *desired) (bool, error) {
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(d.obj.GroupVersionKind())
	if err := a.client.Get(rctx, client.ObjectKey{Namespace: d.id.Namespace, Name: d.id.Name}, live); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	if _, gitSetsKey := d.obj.GetAnnotations()[AnnotationReconcile]; !gitSetsKey && isDisabled(live.GetAnnotations()) {
		return false, nil
	}
	entries, changed, err := a.takeOverEntries(live.GetManagedFields(), d.obj.GetAPIVersion())
	if err != nil || !changed {
		return false, err
	}
	// The test makes a concurrent change fail the patch rather than lose
	// ownership recorded in between; the next cycle tries again.
	body, err := json.Marshal([]any{
		map[string]string{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
		ssa.NewPatchReplace("/metadata/managedFields", entries),
	})
	if err != nil {
		return false, err
	}
	if err := a.client.Patch(rctx, live, client.RawPatch(types.JSONPatchType, body), client.FieldOwner(a.opts.FieldManager)); err != nil {
		return false, err
	}
	return true, nil
}

// takeOverEntries returns managedFields with the non-metadata fields of
// the managers to take over merged into flotilla's apply entry (created
// for apiVersion when missing); their entries keep only their metadata
// fields, or go.
func (a *Applier) takeOverEntries(entries []metav1.ManagedFieldsEntry, apiVersion string) ([]metav1.ManagedFieldsEntry, bool, error) {
	out := make([]metav1.ManagedFieldsEntry, 0, len(entries)+1)
	own := -1
	var taken []*metav1.FieldsV1
	for _, e := range entries {
		switch {
		case e.Manager == a.opts.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "":
			own = len(out)
		case a.takeOverMatch(e):
			meta, rest, err := splitMetadata(e.FieldsV1)
			if err != nil {
				return nil, false, fmt.Errorf("managed fields of %s: %w", e.Manager, err)
			}
			if rest == nil {
				break
			}
			taken = append(taken, rest)
			if meta == nil {
				continue
			}
			e.FieldsV1 = meta
		}
		out = append(out, e)
	}
	if len(taken) == 0 {
		return nil, false, nil
	}
	if own < 0 {
		now := metav1.Now()
		out = append(out, metav1.ManagedFieldsEntry{
			Manager: a.opts.FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: apiVersion,
			Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1("{}"),
		})
		own = len(out) - 1
	}
	set, err := ssa.FieldsToSet(*out[own].FieldsV1)
	if err != nil {
		return nil, false, fmt.Errorf("managed fields of %s: %w", a.opts.FieldManager, err)
	}
	for _, f := range taken {
		add, err := ssa.FieldsToSet(*f)
		if err != nil {
			return nil, false, err
		}
		set = *set.Union(&add)
	}
	merged, err := ssa.SetToFields(set)
	if err != nil {
		return nil, false, err
	}
	out[own].FieldsV1 = &merged
	return out, true, nil
}

// splitMetadata splits a FieldsV1 set into its metadata fields and the
// rest; either is nil when empty.
func splitMetadata(f *metav1.FieldsV1) (meta, rest *metav1.FieldsV1, err error) {
	if f == nil {
		return nil, nil, nil
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(f.GetRawBytes(), &set); err != nil {
		return nil, nil, err
	}
	m, ok := set["f:metadata"]
	if ok {
		delete(set, "f:metadata")
		raw, err := json.Marshal(map[string]json.RawMessage{"f:metadata": m})
		if err != nil {
			return nil, nil, err
		}
		meta = metav1.NewFieldsV1(string(raw))
	}
	if len(set) > 0 {
		raw, err := json.Marshal(set)
		if err != nil {
			return nil, nil, err
		}
		rest = metav1.NewFieldsV1(string(raw))
	}
	return meta, rest, nil
}

// replace writes Git's content over the live object with an update, as
// kubectl replace does: every top-level field Git sets but metadata and
// status is replaced whole, so list items that a server-side apply would
// merge (a port whose key another manager changed) are gone; Git's labels
// and annotations are set, others' kept. The resourceVersion read makes a
// concurrent change fail it. Unlike recreate it neither deletes the
// object nor restarts its pods, and admission still judges the result.
func (a *Applier) replace(ctx context.Context, d *desired) error {
	rctx, cancel := a.reqCtx(ctx)
	defer cancel()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(d.obj.GroupVersionKind())
	if err := a.client.Get(rctx, client.ObjectKey{Namespace: d.id.Namespace, Name: d.id.Name}, live); err != nil {
		return err
	}
	for k, v := range d.obj.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		live.Object[k] = runtime.DeepCopyJSONValue(v)
	}
	live.SetLabels(withEntries(live.GetLabels(), d.obj.GetLabels()))
	live.SetAnnotations(withEntries(live.GetAnnotations(), d.obj.GetAnnotations()))
	return a.client.Update(rctx, live, client.FieldOwner(replaceManager))
}

// withEntries is m with add's entries set.
func withEntries(m, add map[string]string) map[string]string {
	if len(add) == 0 {
		return m
	}
	if m == nil {
		m = make(map[string]string, len(add))
	}
	maps.Copy(m, add)
	return m
}
