package fleet

import (
	"regexp"
	"sort"
)

// ProviderLabel is the cluster label naming its cloud, which decides how a
// workload identity is written on that cluster.
const ProviderLabel = "provider"

// Cloud providers whose workload identity Flotilla writes.
const (
	ProviderAWS     = "aws"
	ProviderAzure   = "azure"
	ProviderGCP     = "gcp"
	ProviderAlibaba = "alibaba"
)

// WorkloadIdentity maps a ServiceAccount on every member of a fleet to a
// cloud role, so pods authenticate to the cloud with a projected token
// instead of static keys. Exactly one of Role and Roles is set.
type WorkloadIdentity struct {
	Namespace      string `json:"namespace"`
	ServiceAccount string `json:"serviceAccount"`
	// Role applies on every member, whatever its provider (a fleet of one
	// cloud).
	Role string `json:"role,omitempty"`
	// Roles are per provider (aws, azure, gcp, alibaba); every member's
	// provider needs one.
	Roles map[string]string `json:"roles,omitempty"`
}

// RoleFor returns the role of the identity on a cluster of provider.
func (w *WorkloadIdentity) RoleFor(provider string) (string, bool) {
	if w.Role != "" {
		return w.Role, true
	}
	r, ok := w.Roles[provider]
	return r, ok
}

// providerRoles says, per provider, what a role looks like.
var providerRoles = map[string]struct {
	re   *regexp.Regexp
	what string
}{
	// An IAM role ARN (IRSA), in any partition.
	ProviderAWS: {regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$`), "an IAM role ARN such as arn:aws:iam::123456789012:role/name"},
	// The client ID of a managed identity or app registration.
	ProviderAzure: {regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`), "a client ID (a GUID)"},
	// A Google service account's email.
	ProviderGCP: {regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}@[a-z0-9][a-z0-9.-]*\.gserviceaccount\.com$`), "a service account email such as name@project.iam.gserviceaccount.com"},
	// A RAM role name (RRSA).
	ProviderAlibaba: {regexp.MustCompile(`^[A-Za-z0-9.-]{1,64}$`), "a RAM role name (letters, digits, '.' and '-', at most 64)"},
}

// Providers returns the known providers, sorted.
func Providers() []string {
	out := make([]string, 0, len(providerRoles))
	for p := range providerRoles {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// KnownProvider reports whether p is a provider Flotilla writes
// identities for.
func KnownProvider(p string) bool {
	_, ok := providerRoles[p]
	return ok
}

// ClusterProvider returns the cluster's provider label, and whether it is
// set.
func ClusterProvider(c *Cluster) (string, bool) {
	p, ok := c.Metadata.Labels[ProviderLabel]
	return p, ok
}
