package identity

import (
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// The keys each provider's workload identity webhook reads.
const (
	AWSRoleARNAnnotation        = "eks.amazonaws.com/role-arn"
	AzureClientIDAnnotation     = "azure.workload.identity/client-id"
	AzureUseLabel               = "azure.workload.identity/use"
	GCPServiceAccountAnnotation = "iam.gke.io/gcp-service-account"
	AlibabaRoleNameAnnotation   = "pod-identity.alibabacloud.com/role-name"
)

// Problems ServiceAccounts reports (hub/fleet rejects each at load time;
// these guard a Repo assembled otherwise).
var (
	ErrUnknownProvider = errors.New("unknown workload identity provider")
	ErrNoRole          = errors.New("no role for the cluster's provider")
	ErrConflict        = errors.New("ServiceAccount mapped to two roles")
)

// Metadata returns the annotations and labels that bind a ServiceAccount
// to role on provider.
func Metadata(provider, role string) (annotations, labels map[string]string, err error) {
	switch provider {
	case fleet.ProviderAWS:
		return map[string]string{AWSRoleARNAnnotation: role}, nil, nil
	case fleet.ProviderAzure:
		// The webhook reads the label from pods (v1.0+) and, before, from
		// the ServiceAccount; pods need it too, which only their owner can
		// add.
		return map[string]string{AzureClientIDAnnotation: role}, map[string]string{AzureUseLabel: "true"}, nil
	case fleet.ProviderGCP:
		return map[string]string{GCPServiceAccountAnnotation: role}, nil, nil
	case fleet.ProviderAlibaba:
		return map[string]string{AlibabaRoleNameAnnotation: role}, nil, nil
	}
	return nil, nil, fmt.Errorf("%w: %q", ErrUnknownProvider, provider)
}

// ServiceAccounts returns the ServiceAccounts that the identities of
// fleets (the cluster's fleets) map on cluster, written for its provider,
// sorted by namespace and name. The same mapping from two fleets is
// written once.
func ServiceAccounts(cluster *fleet.Cluster, fleets []*fleet.Fleet) ([]*corev1.ServiceAccount, error) {
	var identities []fleet.WorkloadIdentity
	var sources []*fleet.Fleet
	for _, f := range fleets {
		for _, w := range f.Spec.WorkloadIdentity {
			identities = append(identities, w)
			sources = append(sources, f)
		}
	}
	if len(identities) == 0 {
		return nil, nil
	}
	provider, ok := fleet.ClusterProvider(cluster)
	if !ok || !fleet.KnownProvider(provider) {
		return nil, fmt.Errorf("cluster %s: %w: label %s=%q", cluster.Metadata.Name, ErrUnknownProvider, fleet.ProviderLabel, provider)
	}
	type entry struct {
		role  string
		fleet string
	}
	roles := map[[2]string]entry{}
	for i, w := range identities {
		role, ok := w.RoleFor(provider)
		if !ok {
			return nil, fmt.Errorf("cluster %s: fleet %s, ServiceAccount %s/%s: %w %s", cluster.Metadata.Name, sources[i].Metadata.Name, w.Namespace, w.ServiceAccount, ErrNoRole, provider)
		}
		key := [2]string{w.Namespace, w.ServiceAccount}
		if prev, seen := roles[key]; seen && prev.role != role {
			return nil, fmt.Errorf("cluster %s: %w: %s/%s by fleets %s and %s", cluster.Metadata.Name, ErrConflict, w.Namespace, w.ServiceAccount, prev.fleet, sources[i].Metadata.Name)
		}
		roles[key] = entry{role, sources[i].Metadata.Name}
	}
	keys := make([][2]string, 0, len(roles))
	for k := range roles {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	out := make([]*corev1.ServiceAccount, 0, len(keys))
	for _, k := range keys {
		annotations, labels, err := Metadata(provider, roles[k].role)
		if err != nil {
			return nil, err
		}
		out = append(out, &corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: k[1], Namespace: k[0], Annotations: annotations, Labels: labels},
		})
	}
	return out, nil
}
