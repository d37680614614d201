// Package pkg holds the flotilla libraries, one concept per package (see
// each package's doc.go), cut by side as well as by topic:
//
//   - Shared by the hub and the agent: slice (the contract between them),
//     render (Kustomize and Helm rendering, so a plan is what gets applied),
//     gitrepo (the only importer of go-git), status (the status document and
//     its writer), placement (gang arithmetic), plural, verify, version.
//   - Agent only: apply (server-side apply, inventory, prune, health) and
//     volcano (jobs and queues in the cluster).
//   - Hub only: fleet (the fleet repo model), compile (fleet repo to
//     slices), render/chartvendor, fleetstatus (the fleet view from the
//     status refs), plan, bootstrap, admission, traffic, identity,
//     kuratorimport (flotilla import kurator).
//
// The agent's binary links nothing of the hub-only side;
// agent/flotilla-agent's TestAgentLinksNoHubCode keeps it so.
package pkg
