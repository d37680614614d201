package testenv

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// WaitAllowed waits until the API server lets user do verb on resource
// (group "" for the core group) in namespace. RBAC objects take effect once
// the authorizer's informers have seen them, a moment after they are
// written, so a test that grants and then acts at once races that moment.
func (c *Cluster) WaitAllowed(ctx context.Context, user, verb, group, resource, namespace string) error {
	attrs := &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace}
	return poll(ctx, fmt.Sprintf("%s allowed to %s %s in %q", user, verb, resource, namespace), func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs}}
		if err := c.client.Create(ctx, sar); err != nil {
			return false, fmt.Errorf("access review: %w", err)
		}
		return sar.Status.Allowed, nil
	})
}
