// Package agent holds the in-cluster agent, flotilla-agent: its binary
// (flotilla-agent, cmd), its reconcile loop (reconcile) and what only the
// agent runs: server-side apply, inventory, prune and health (apply),
// Volcano jobs and queues (volcano), commit signature verification
// (verify), the trust state kept in the cluster (truststate), the status
// writer (statuswriter), metrics and memory (metrics, procmem). The hub
// links none of it (hub/flotilla's TestHubLinksNoAgentCode); see
// docs/architecture.md.
package agent
