// Package fleetrender is the hub's compiler: it turns a loaded fleet.Repo into
// every cluster's slice (pkg/slice) and writes rendered/. Only the hub links
// it; the agent reads slices through pkg/slice alone, so the fleet model,
// admission policies, traffic routes, identities, placement and chart
// vendoring stay out of the agent binary.
//
//   - Pipeline is how hub commands compile: it gathers what a compile needs
//     besides the repo's files — jobs already placed (from the committed
//     rendered/), the clusters' reported capacity (status refs) and the
//     chart vendor — so render, validate and plan agree on one tree.
//   - Compile turns a loaded repo and those inputs into every cluster's
//     units (one per application whose syncPolicies match the cluster,
//     plus flotilla-namespaces for the namespaces its fleets declare, the
//     fleet-wide policy, identity and route units, Volcano queues and job
//     pieces) with their generated files: a kustomization.yaml referring to
//     the shared source and adding the cluster's customisations, merged Helm
//     values, and a slice.yaml listing the units in dependency order with a
//     hash over everything each unit's render reads. Work that cannot
//     differ between clusters is done once and shared.
//   - Applications under a rollout (rollout.go) read their sources from a
//     content-addressed snapshot under rendered/snapshots/, and clusters
//     whose wave is not released keep their committed unit byte for byte;
//     the rollout state (hub/rollout) is generated alongside.
//   - Every distinct unit is rendered once (pkg/render, as the agent
//     renders it) so that the compiler knows each unit's objects: two
//     units of a cluster producing one object is an error, except an
//     application's copy of a Namespace its cluster's fleets declare, which
//     is left out of the application's unit and merged into
//     flotilla-namespaces (ownership.go). A unit whose sources hold an
//     object no cluster can apply (no name, only generateName, a
//     duplicate: render.ErrInvalidObject) is an error too; other render
//     failures may depend on the cluster and are left to plan and the agent.
//   - Write makes rendered/ hold exactly that, byte for byte, touching only
//     files whose content changed and removing stale ones; Check mode
//     reports the differences without writing.
//
// Weighted replica division is pkg/placement's arithmetic; chart vendoring
// is pkg/render/chartvendor's; vendoring Git sources (spec.source.git, into
// sources/<application>/ before any source is read; their paths are then
// inside that copy) is hub/gitsource's.
package fleetrender
