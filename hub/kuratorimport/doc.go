// Package kuratorimport converts Kurator's fleet, cluster and application
// objects into Flotilla fleet repo files (`flotilla import kurator`).
//
// It reads Kurator's YAML with its own minimal types whose field names
// follow Kurator's API as of kurator-dev/kurator commit
// b6339412dc3b0a408a99b14531ae233e9de9d652 (2025-09-22):
// pkg/apis/fleet/v1alpha1/types.go (Fleet), pkg/apis/cluster/v1alpha1/
// attached_cluster_types.go and cluster_types.go (AttachedCluster,
// Cluster), pkg/apis/apps/v1alpha1/types.go, kustomization.go and
// helm_release.go (Application and its sync policies; sources are Flux's
// GitRepositorySpec and HelmRepositorySpec). Kurator's Go module is not
// imported: it drags in Cluster API, Flux, Flagger and Istio.
//
// Conversion is all in memory: Convert returns every file and every
// warning, or an error naming file, line and field; Write refuses to
// overwrite and writes nothing when anything is wrong. Every field of the
// input that Flotilla has no equivalent for is reported as a warning with
// its file, line and field path, found by walking the YAML against the set
// of fields the converter consumes — so a field is never dropped silently.
//
// It is hub-only: the agent must not link it.
package kuratorimport
