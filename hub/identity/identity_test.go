package identity_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/identity"
)

func cluster(provider string) *fleet.Cluster {
	c := &fleet.Cluster{Metadata: fleet.ObjectMeta{Name: "c1", Labels: map[string]string{"env": "prod"}}}
	if provider != "" {
		c.Metadata.Labels[fleet.ProviderLabel] = provider
	}
	return c
}

func fleetOf(name string, ids ...fleet.WorkloadIdentity) *fleet.Fleet {
	return &fleet.Fleet{Metadata: fleet.ObjectMeta{Name: name}, Spec: fleet.FleetSpec{WorkloadIdentity: ids}}
}

var multiCloud = fleet.WorkloadIdentity{
	Namespace: "shop", ServiceAccount: "payments",
	Roles: map[string]string{
		"aws":     "arn:aws:iam::123456789012:role/payments",
		"azure":   "8a5c3a2e-1b7d-4d2f-9c1e-0f6b2a7d9e41",
		"gcp":     "payments@acme.iam.gserviceaccount.com",
		"alibaba": "payments-role",
	},
}

// TestProviders: each provider gets the annotation (and label) its
// workload identity webhook reads.
func TestProviders(t *testing.T) {
	cases := []struct {
		provider    string
		annotations map[string]string
		labels      map[string]string
	}{
		{"aws", map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/payments"}, nil},
		{"azure", map[string]string{"azure.workload.identity/client-id": "8a5c3a2e-1b7d-4d2f-9c1e-0f6b2a7d9e41"}, map[string]string{"azure.workload.identity/use": "true"}},
		{"gcp", map[string]string{"iam.gke.io/gcp-service-account": "payments@acme.iam.gserviceaccount.com"}, nil},
		{"alibaba", map[string]string{"pod-identity.alibabacloud.com/role-name": "payments-role"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			sas, err := identity.ServiceAccounts(cluster(tc.provider), []*fleet.Fleet{fleetOf("prod", multiCloud)})
			if err != nil {
				t.Fatal(err)
			}
			if len(sas) != 1 {
				t.Fatalf("%d ServiceAccounts", len(sas))
			}
			sa := sas[0]
			if sa.APIVersion != "v1" || sa.Kind != "ServiceAccount" || sa.Namespace != "shop" || sa.Name != "payments" {
				t.Errorf("object %s %s %s/%s", sa.APIVersion, sa.Kind, sa.Namespace, sa.Name)
			}
			if !reflect.DeepEqual(sa.Annotations, tc.annotations) || !reflect.DeepEqual(sa.Labels, tc.labels) {
				t.Errorf("annotations %v labels %v, want %v %v", sa.Annotations, sa.Labels, tc.annotations, tc.labels)
			}
		})
	}
}

func TestServiceAccounts(t *testing.T) {
	single := fleet.WorkloadIdentity{Namespace: "default", ServiceAccount: "reporter", Role: "arn:aws:iam::123456789012:role/reporter"}
	// Two fleets mapping one ServiceAccount the same way write it once;
	// the result is sorted by namespace and name.
	sas, err := identity.ServiceAccounts(cluster("aws"), []*fleet.Fleet{fleetOf("a", multiCloud, single), fleetOf("b", multiCloud)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sa := range sas {
		got = append(got, sa.Namespace+"/"+sa.Name)
	}
	if !reflect.DeepEqual(got, []string{"default/reporter", "shop/payments"}) {
		t.Errorf("ServiceAccounts %v", got)
	}
	if sas, err := identity.ServiceAccounts(cluster(""), []*fleet.Fleet{fleetOf("a")}); sas != nil || err != nil {
		t.Errorf("no identities: %v, %v", sas, err)
	}

	other := multiCloud
	other.Roles = map[string]string{"aws": "arn:aws:iam::123456789012:role/other"}
	for name, tc := range map[string]struct {
		cluster *fleet.Cluster
		fleets  []*fleet.Fleet
		want    error
	}{
		"unknown provider": {cluster("onprem"), []*fleet.Fleet{fleetOf("a", multiCloud)}, identity.ErrUnknownProvider},
		"no provider":      {cluster(""), []*fleet.Fleet{fleetOf("a", multiCloud)}, identity.ErrUnknownProvider},
		"no role":          {cluster("azure"), []*fleet.Fleet{fleetOf("a", other)}, identity.ErrNoRole},
		"conflict":         {cluster("aws"), []*fleet.Fleet{fleetOf("a", multiCloud), fleetOf("b", other)}, identity.ErrConflict},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := identity.ServiceAccounts(tc.cluster, tc.fleets); !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
	if _, _, err := identity.Metadata("oracle", "x"); !errors.Is(err, identity.ErrUnknownProvider) {
		t.Errorf("Metadata(oracle): %v", err)
	}
}
