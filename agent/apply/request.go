package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// newRawClient returns a REST client for absolute API paths that decodes
// into unstructured objects. Apply goes through it rather than the
// controller-runtime client because only the HTTP status tells a create
// (201) from an update (200).
func newRawClient(cfg *rest.Config, httpClient *http.Client) (rest.Interface, error) {
	c := dynamic.ConfigFor(rest.CopyConfig(cfg))
	c.GroupVersion = &schema.GroupVersion{}
	c.APIPath = "/"
	return rest.RESTClientForConfigAndClient(c, httpClient)
}

// serverSideApply sends obj as a server-side apply patch (forcing
// ownership) and returns the object as stored, and whether the request
// created it.
func (a *Applier) serverSideApply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, bool, error) {
	path, err := a.objectPath(obj)
	if err != nil {
		return nil, false, err
	}
	body, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, false, err
	}
	req := a.raw.Patch(types.ApplyPatchType).AbsPath(path).
		Param("fieldManager", a.opts.FieldManager).Param("force", "true").Body(body)
	if dryRun {
		req = req.Param("dryRun", "All")
	}
	var code int
	result := req.Do(ctx).StatusCode(&code)
	// Error, not Raw's error, decodes the API status (reason, causes).
	if err := result.Error(); err != nil {
		return nil, false, err
	}
	raw, err := result.Raw()
	if err != nil {
		return nil, false, err
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(raw); err != nil {
		return nil, false, fmt.Errorf("decode apply response: %w", err)
	}
	return out, code == http.StatusCreated, nil
}

// objectPath is the API path of obj, from the REST mapping of its kind.
func (a *Applier) objectPath(obj *unstructured.Unstructured) (string, error) {
	gvk := obj.GroupVersionKind()
	m, err := a.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if gvk.Group == "" {
		b.WriteString("/api/" + gvk.Version)
	} else {
		b.WriteString("/apis/" + gvk.Group + "/" + gvk.Version)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		b.WriteString("/namespaces/" + url.PathEscape(obj.GetNamespace()))
	}
	b.WriteString("/" + m.Resource.Resource + "/" + url.PathEscape(obj.GetName()))
	return b.String(), nil
}
