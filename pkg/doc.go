// Package pkg holds the flotilla libraries, one concept per package (see
// each package's doc.go), cut by side as well as by topic:
//
//   - Shared by the hub and the agent: slice and status (the Git contract
//     between them: what the hub cut for a cluster, what its agent
//     reports, and the writer that commits it), render (Kustomize and Helm
//     rendering of one unit, so a plan is what gets applied; with
//     render/sopsdecrypt), gitrepo (the only importer of go-git), redact,
//     placement (gang arithmetic), plural, verify, version.
//   - Agent only: apply (server-side apply, inventory, prune, health) and
//     volcano (jobs and queues in the cluster).
//   - Hub only: fleet (the fleet repo model), compile (fleet repo to
//     slices: `flotilla render`), render/chartvendor, gitsource (external
//     Git sources), fleetstatus (the fleet view from the status refs),
//     plan, rollout, dashboard, bootstrap, admission, traffic, identity,
//     kuratorimport (flotilla import kurator).
//
// The agent's binary links only the first two groups:
// agent/flotilla-agent's TestAgentLinksNoHubCode holds the allow-list
// (agentSide), so a new package is hub-only until it is added there.
package pkg
