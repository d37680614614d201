// Package identity owns writing a fleet's workload identity mapping — a
// (namespace, ServiceAccount) bound to a cloud role — as the ServiceAccount
// each target cluster's provider reads, so no cluster stores static cloud
// keys:
//
//	aws      eks.amazonaws.com/role-arn: <role ARN>                (IRSA)
//	azure    azure.workload.identity/client-id: <client ID>,
//	         label azure.workload.identity/use: "true"             (Azure Workload Identity)
//	gcp      iam.gke.io/gcp-service-account: <service account email> (GKE Workload Identity)
//	alibaba  pod-identity.alibabacloud.com/role-name: <RAM role>   (ACK RRSA)
//
// The provider is the cluster's "provider" label. Mappings are validated
// when hub/fleet loads the fleets; selecting clusters and writing slices is
// hub/fleetrender's job.
package identity
