package apply

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// namespaceListPage bounds each list of a namespace's objects.
const namespaceListPage = 100

// isNamespace reports whether e is a core Namespace.
func isNamespace(e Entry) bool {
	gvk := e.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Namespace"
}

// unmanagedIn names an object in namespace ns that Flotilla does not manage,
// or returns "" when there is none. Deleting a Namespace deletes everything
// in it, so prune keeps one that holds someone else's objects. Objects with
// an owner (pods of a Deployment, EndpointSlices of a Service) follow their
// owner; events, and the ServiceAccount and CA ConfigMap Kubernetes puts in
// every namespace, do not count. An error means the namespace could not be
// checked; the caller keeps it for the next attempt.
func (a *Applier) unmanagedIn(ctx context.Context, ns string) (string, error) {
	if a.disc == nil {
		return "", fmt.Errorf("namespace %s: no discovery to list its objects: %w", ns, ErrPrune)
	}
	// A CRD installed since the last discovery must be listed too.
	a.disc.InvalidateWithContext(ctx)
	rctx, cancel := a.reqCtx(ctx)
	lists, err := discovery.ServerPreferredNamespacedResourcesWithContext(rctx, a.disc)
	cancel()
	if err != nil {
		// A partial answer cannot prove the namespace empty of others' objects.
		return "", fmt.Errorf("namespace %s: discover resource types: %w", ns, err)
	}
	req, err := labels.NewRequirement(LabelManagedBy, selection.NotEquals, []string{ManagedByValue})
	if err != nil {
		return "", err
	}
	sel := labels.NewSelector().Add(*req)
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		if gv.Group == "events.k8s.io" {
			continue
		}
		for _, r := range l.APIResources {
			if !canList(r) || (gv.Group == "" && r.Name == "events") {
				continue
			}
			if found, err := a.firstUnmanaged(ctx, gv.WithKind(r.Kind), ns, sel); err != nil || found != "" {
				return found, err
			}
		}
	}
	return "", nil
}

func canList(r metav1.APIResource) bool {
	for _, v := range r.Verbs {
		if v == "list" {
			return true
		}
	}
	return false
}

// firstUnmanaged pages through one kind's objects in ns that lack
// Flotilla's managed-by label.
func (a *Applier) firstUnmanaged(ctx context.Context, gvk schema.GroupVersionKind, ns string, sel labels.Selector) (string, error) {
	cont := ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		rctx, cancel := a.reqCtx(ctx)
		err := a.client.List(rctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel},
			client.Limit(namespaceListPage), client.Continue(cont))
		cancel()
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			// The kind went away since discovery (its CRD was deleted):
			// no object of it is left in ns.
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("namespace %s: list %s: %w", ns, gvk.Kind, err)
		}
		for _, o := range list.Items {
			if len(o.OwnerReferences) > 0 || o.DeletionTimestamp != nil || builtIn(gvk, o.Name) {
				continue
			}
			return gvk.Kind + "/" + ns + "/" + o.Name, nil
		}
		if cont = list.Continue; cont == "" {
			return "", nil
		}
	}
}

// builtIn: objects Kubernetes creates in every namespace.
func builtIn(gvk schema.GroupVersionKind, name string) bool {
	if gvk.Group != "" {
		return false
	}
	return (gvk.Kind == "ServiceAccount" && name == "default") || (gvk.Kind == "ConfigMap" && name == "kube-root-ca.crt")
}
