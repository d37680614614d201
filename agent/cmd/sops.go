package cmd

import (
	"context"
	"fmt"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
)

const (
	defaultSopsAgeSecret = "flotilla-sops-age"
	// sopsAgeKey is the Secret key holding the identity, as Flux names it.
	sopsAgeKey = "age.agekey"
)

// sopsKeyring decrypts SOPS documents with the age identity in the Secret
// name of namespace, read at every use so a rotated key applies at the
// next render. A missing Secret (or key) means the cluster has no key: its
// encrypted units fail with DecryptionFailed, the others apply.
func sopsKeyring(c client.Reader, namespace, name string) *sopsdecrypt.Keyring {
	return &sopsdecrypt.Keyring{Load: func(ctx context.Context) ([]age.Identity, error) {
		if name == "" {
			return nil, nil
		}
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("reading the age key Secret %s/%s: %w", namespace, name, err)
		}
		ids, err := sopsdecrypt.ParseIdentities(s.Data[sopsAgeKey])
		if err != nil {
			return nil, fmt.Errorf("the age key Secret %s/%s, key %s: %w", namespace, name, sopsAgeKey, err)
		}
		return ids, nil
	}}
}
