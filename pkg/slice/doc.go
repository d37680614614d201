// Package slice owns the per-cluster slice: the contract between the hub,
// which compiles a fleet.Repo into rendered/<bucket>/<cluster>/, and the
// agent, which reads its cluster's slice.yaml and hands each unit to
// pkg/render. It owns the rendered/ tree layout, unit naming, content
// hashes and the deterministic writer.
//
//   - Compile turns a loaded repo into every cluster's units (one per
//     application whose syncPolicies match the cluster, plus
//     flotilla-namespaces for the namespaces its fleets declare) with their
//     generated files: a kustomization.yaml referring to the shared source
//     and adding the cluster's customisations, merged Helm values, and a
//     slice.yaml listing the units in dependency order with a hash over
//     everything each unit's render reads. Work that cannot differ between
//     clusters is done once and shared.
//   - Write makes rendered/ hold exactly that, byte for byte, touching only
//     files whose content changed and removing stale ones; Check mode
//     reports the differences without writing.
//   - Read and Parse load one slice strictly, for the agent.
//
// Weighted replica division is pkg/placement's arithmetic; chart vendoring
// is pkg/render's, passed in as a ChartVendor because pkg/render imports
// this package.
package slice
