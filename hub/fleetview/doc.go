// Package fleetview owns the hub's view of the fleet's status: it reads
// every cluster's status document (pkg/status) from Git, judges whether
// each can be believed, and shows the fleet, a rollout and the Volcano jobs
// (`flotilla status`, `flotilla status rollout`, `flotilla status jobs`),
// and hands reported capacity to GlobalJob placement. Only the hub links
// it: it needs the fleet model (hub/fleet) to know the clusters, their
// fleets and their statusKeys, which the agent must not carry.
//
// # The fleet view
//
// Read loads clusters/ and fleets/ from the fleet repo's branch head (a URL,
// fetched into a cache, or a local clone or bare repository read in
// place), reads every status ref (gitrepo.ReadRefs) and returns a View:
// per cluster its State (InSync, Behind, PruneHeld, Failing, Unreachable,
// ClockSkew, Conflict, NoStatus, Untrusted; PruneHeld: the agent holds a
// prune of most of the cluster until `flotilla cluster decommission`),
// revisions, units Ready/total, failing units with reasons, Volcano jobs by
// phase and the heartbeat's age. A cluster applied at an older commit is
// InSync when no file of its slice (rendered/<bucket>/<cluster>/) changed
// since. Unreachable means no
// heartbeat for longer than the strictest interval × failureThreshold of
// the cluster's fleets (DefaultHealthCheckInterval × DefaultFailureThreshold,
// 10m × 3, when none sets a healthCheck: a shorter default would flag
// every idle cluster between two default heartbeats). Status repos may be
// several (ReadOptions.StatusRepos, the shards of status.ShardURLs).
// ClockSkew: the heartbeat or status commit is ahead of the reader's clock
// by more than ReadOptions.ClockSkewTolerance (2m), with the offset; such
// an age would otherwise read as 0 and the cluster as alive forever.
// Conflict: the head document's instanceID differs from the previous
// commit's while that one's heartbeat was within the Unreachable threshold
// of the head's (two agents with one cluster name); a change of instance
// after the old one went quiet is a re-install and accepted.
// View.Unhealthy lists the clusters Failing, Unreachable or Untrusted
// (UnhealthyStates), which `flotilla status --exit-code` exits 1 on.
//
// # Trust
//
// A status ref is believed only when its head commit changes status.yaml
// alone, the document names the ref's cluster, the cluster exists in
// clusters/, and, when the cluster lists spec.statusKeys, the commit is
// signed by one of them; otherwise the cluster is Untrusted with the
// reason and nothing of the document is shown as fact.
//
// # Rollouts
//
// ReadRollout follows one merged commit: per cluster Dispatched (the commit
// changed its slice), Propagating (the agent fetched it or later),
// Completed (applied at it or later, all units Ready) or Failed, or
// Unaffected. It is derived from Git alone, so reading it again is safe.
//
// # Documents, jobs and capacity
//
// ReadDocuments (at the branch head) and DocumentsFor (against a fleet
// repo loaded from a working tree, as `flotilla render` has it) return the
// judged documents themselves, the raw material of the other views:
// NewJobsView lists every cluster's Volcano jobs, and CapacitiesFrom turns
// the reported capacity snapshots into GlobalJob BestFit's input.
//
// ReadSnapshot reads the fleet once and returns the fleet view, the
// documents and the rollout of the branch head together, with each
// cluster's labels: the page of the whole fleet (hub/dashboard) is made
// from it at every refresh, so one Git read serves all three.
//
// # Printing
//
// WriteFleet, WriteRollout and WriteJobs print the views in one of
// Formats: table, json, yaml or markdown.
package fleetview
