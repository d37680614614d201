package fleet

import (
	"errors"
	"fmt"
	"strings"

	"filippo.io/age"
	"github.com/Masterminds/semver/v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

func (v *validator) cluster(c *Cluster) {
	d := v.docs[c]
	v.meta(d, c.Metadata)
	if kv := c.Spec.KubernetesVersion; kv != "" {
		if _, err := semver.StrictNewVersion(strings.TrimPrefix(kv, "v")); err != nil {
			d.errorf("spec.kubernetesVersion", ErrInvalidValue, "%q is not a version like v1.36.3", kv)
		}
	}
	for i, gv := range c.Spec.APIVersions {
		if _, err := parseGroupVersion(gv); err != nil {
			d.errorf(indexPath("spec.apiVersions", i), ErrInvalidValue, "%q: %v", gv, err)
		}
	}
	nonNegativeResources(d, "spec.capacity", resourceMap(c.Spec.Capacity))
	for i, k := range c.Spec.StatusKeys {
		if strings.TrimSpace(k) == "" {
			d.errorf(indexPath("spec.statusKeys", i), ErrInvalidValue, "empty key")
		}
	}
	if s := c.Spec.SOPS; s != nil {
		switch _, err := age.ParseX25519Recipient(s.AgeRecipient); {
		case strings.HasPrefix(strings.TrimSpace(s.AgeRecipient), "AGE-SECRET-KEY-"):
			// Never echo it: remove it from the file and the history, and rotate it.
			d.errorf("spec.sops.ageRecipient", ErrInvalidValue, "this is a private age key, not an age recipient: remove it from Git and rotate the key")
		case err != nil:
			d.errorf("spec.sops.ageRecipient", ErrInvalidValue, "not an age recipient (age1…, as age-keygen -y prints it)")
		}
	}
}

func parseGroupVersion(gv string) (string, error) {
	group, version, found := strings.Cut(gv, "/")
	if !found {
		group, version = "", gv
	}
	if version == "" || strings.Contains(version, "/") {
		return "", errors.New("must be <group>/<version> or <version>")
	}
	if group != "" {
		if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
			return "", fmt.Errorf("invalid group: %s", strings.Join(errs, "; "))
		}
	}
	if errs := validation.IsDNS1123Label(version); len(errs) > 0 {
		return "", fmt.Errorf("invalid version: %s", strings.Join(errs, "; "))
	}
	return gv, nil
}
