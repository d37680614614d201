// Package fleet owns the fleet repo's input kinds — Cluster, Fleet (with
// its workload identities), Application, GlobalJob, TrafficRoute and
// FleetPolicy — under
// apiVersion flotilla.dev/v1alpha1 — and loading them from a repo tree with
// strict decoding and validation. Every error names the file, line and field.
//
// It does not render anything: hub/fleetrender turns a loaded Repo into per-cluster
// slices, pkg/render turns a slice's units into Kubernetes objects.
package fleet
