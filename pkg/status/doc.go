// Package status owns the ClusterStatus document an agent commits to its
// own Git ref (refs/heads/flotilla/status/<cluster>) and the writer that
// commits it only on meaningful change plus a heartbeat. The agent links
// it, so it holds nothing the agent does not run or both sides do not
// share: the hub's reading of every cluster's document into the fleet
// view, and the judging of status commits, are in pkg/fleetstatus.
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
// While a cycle runs the agent publishes the last result again with
// progress (Progress: the cycle's phase and the units it is working on,
// since when); such a document is apiVersion v1alpha3, so a hub that does
// not know the field says ErrUnsupportedVersion. Progress moving on is not
// a meaningful change (heartbeats carry it); its appearance, in a cycle
// that outlasts half a heartbeat interval, and its end are.
//
// A unit's readiness at its content (readyHash, readySince: Ready at this
// hash without a break since then; readyHashes: the hashes it has been
// Ready at) makes a document v1alpha4. Rollouts measure bake from
// readySince and return aborted clusters to a hash in readyHashes.
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
// by a stable hash of the cluster name; the hub reads them all
// (ShardURLs).
//
// # Cluster instances
//
// WriterOptions.InstanceID (the agent's kube-system namespace UID) goes
// into every document as instanceID, which makes it apiVersion v1alpha2
// (a document without one stays v1alpha1). Before each commit the writer
// reads the document on its ref; if it names another instance whose
// heartbeat is younger than TakeOverAfter (3 heartbeat intervals) it
// refuses: ErrInstanceConflict, flotilla_status_push_total{result=
// "instance_conflict"}, the document stays pending and is retried. A
// re-installed cluster thus takes its ref over once the old instance has
// gone quiet, or at once with WriterOptions.TakeOver
// (--status-take-over).
//
// # Reading the conditions
//
// UnitReady, UnitFailing, UnitFailure and ClusterFailure say how a
// document's conditions read; the writer's commit messages and the hub's
// fleet view both use them.
package status
