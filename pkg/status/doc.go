// Package status owns the ClusterStatus document an agent commits to its
// own Git ref (refs/heads/flotilla/status/<cluster>), the writer that
// commits it only on meaningful change plus a heartbeat, and the hub-side
// reader that aggregates every cluster's document into the fleet view,
// flagging status commits that are not trustworthy.
//
// # The document
//
// status.yaml is apiVersion flotilla.dev/v1alpha1, kind ClusterStatus
// (types.go). Encode writes deterministic YAML (field order, sorted keys
// and lists, RFC 3339 UTC times); Decode is strict and versioned: an
// unknown field is ErrInvalidDocument, another apiVersion or kind
// ErrUnsupportedVersion. Redact and RedactDocument strip anything that may
// be Secret data from messages (PEM blocks, URL passwords, data/stringData
// values in JSON, YAML and Go map form, the rest of an error clause about
// such a field, credential-looking pairs, base64-looking blobs) and bound
// their length; the writer applies them to every document before it
// leaves the process. MeaningfullyChanged decides what is worth a commit:
// not the heartbeat, condition transition times, load-driven counters, or
// revisions that moved while no unit's content hash did (a merge that
// leaves a cluster's slice alone costs that cluster no commit).
//
// # Writing (agent)
//
//	w, err := status.NewWriter(status.WriterOptions{Cluster: "edge-1", URL: statusRepo, Auth: auth,
//		HeartbeatInterval: 10 * time.Minute, Signer: signer, Registerer: reg})
//	go w.Run(ctx)          // heartbeats, retries of a buffered document
//	err = w.Publish(ctx, doc) // the agent loop's StatusSink
//
// A commit is made when the document changed meaningfully since the last
// one, or when the heartbeat is due (HeartbeatInterval ± 10 % after the
// last commit): one small commit changing the heartbeat line only. Commits
// go to RefFor(cluster) only, authored "<cluster> <agent@<cluster>.flotilla>",
// optionally signed (OpenPGP or SSH), through gitrepo.Writer (lost races
// are retried on the new head; past MaxHistory commits the ref is squashed
// into one, the only force push, guarded by a lease). While Git is
// unreachable only the latest document is kept; it is pushed once, as one
// commit, when Git returns. Metrics: flotilla_status_push_total{result},
// flotilla_status_push_duration_seconds, flotilla_status_pending.
// ShardURL spreads clusters over several status repos ({shard} in the URL)
// by a stable hash of the cluster name.
//
// # Reading (hub)
//
// Read loads clusters/ and fleets/ from the fleet repo's branch head (a URL,
// fetched into a cache, or a local clone or bare repository read in
// place), reads every status ref (gitrepo.ReadRefs) and returns a
// FleetView: per cluster its State (InSync, Behind, Failing, Unreachable,
// NoStatus, Untrusted), revisions, units Ready/total, failing units with
// reasons, Volcano jobs by phase and the heartbeat's age. A cluster applied
// at an older commit is InSync when no file of its slice
// (rendered/<bucket>/<cluster>/) changed since. Unreachable means no
// heartbeat for longer than the strictest interval × failureThreshold of
// the cluster's fleets (DefaultHealthCheckInterval × DefaultFailureThreshold,
// 10m × 3, when none sets a healthCheck: a shorter default would flag
// every idle cluster between two default heartbeats).
//
// A status ref is believed only when its head commit changes status.yaml
// alone, the document names the ref's cluster, the cluster exists in
// clusters/, and, when the cluster lists spec.statusKeys, the commit is
// signed by one of them; otherwise the cluster is Untrusted with the
// reason and nothing of the document is shown as fact.
//
// ReadRollout follows one merged commit: per cluster Dispatched (the commit
// changed its slice), Propagating (the agent fetched it or later),
// Completed (applied at it or later, all units Ready) or Failed, or
// Unaffected. It is derived from Git alone, so reading it again is safe.
//
// WriteFleet and WriteRollout print the views as table, json, yaml or
// markdown (`flotilla status`, `flotilla status rollout`).
package status
