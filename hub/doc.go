// Package hub holds the flotilla CLI that people and CI run against the
// fleet repo: its binary (flotilla, cmd) and what only the hub runs: the
// fleet model (fleet), its rendering into per-cluster slices (fleetrender,
// `flotilla render`), plan, rollout, the fleet view read from the status
// refs (fleetview), dashboard, bootstrap, admission, traffic, identity,
// external Git sources (gitsource) and kuratorimport. The agent links none
// of it (agent/flotilla-agent's TestAgentLinksNoHubCode); see
// docs/architecture.md.
package hub
