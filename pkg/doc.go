// Package pkg holds what both sides of flotilla run, one concept per
// package (see each package's doc.go). The path of a package says its
// side:
//
//   - pkg/ (here): shared by the hub and the agent. slice and status are
//     the Git contract between them (what the hub cut for a cluster, what
//     its agent reports, and the reasons it reports); render renders one
//     unit, so a plan is what gets applied (with render/sopsdecrypt, and
//     render/chartvendor, which only the hub links but which lives here
//     because Helm is imported only under pkg/render); gitrepo is the only
//     importer of go-git (with gitrepo/signature); redact, placement (gang
//     arithmetic), plural and version.
//   - agent/: the agent's own code: the loop (reconcile), apply, volcano,
//     verify, truststate, statuswriter, metrics, procmem.
//   - hub/: the hub's own code: the fleet model (fleet), its rendering into
//     slices (fleetrender: `flotilla render`), plan, rollout, the fleet
//     view from the status refs (fleetview), dashboard, bootstrap,
//     admission, traffic, identity, gitsource and kuratorimport.
//
// Neither side links the other's: agent/flotilla-agent's
// TestAgentLinksNoHubCode holds the agent's allow-list (agentSide), so a
// new package under pkg/ reaches the agent only once it is added there,
// and hub/flotilla's TestHubLinksNoAgentCode keeps agent/ out of the hub.
package pkg
