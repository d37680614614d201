// Package statuswriter commits an agent's status document (pkg/status) to
// the cluster's own ref, only on meaningful change plus a heartbeat. Only
// the agent links it.
//
//	w, err := statuswriter.NewWriter(statuswriter.WriterOptions{Cluster: "edge-1", URL: statusRepo, Auth: auth,
//		HeartbeatInterval: 10 * time.Minute, Signer: signer, Registerer: reg})
//	go w.Run(ctx)          // heartbeats, retries of a buffered document
//	err = w.Publish(ctx, doc) // the agent loop's StatusSink
//
// A commit is made when the document changed meaningfully since the last
// one, or when the heartbeat is due (HeartbeatInterval ± 10 % after the
// last commit): one small commit changing the heartbeat line only. Commits
// go to status.RefFor(cluster) only, authored "<cluster> <agent@<cluster>.flotilla>",
// optionally signed (OpenPGP or SSH), through gitrepo.Writer (lost races
// are retried on the new head; past MaxHistory commits the ref is squashed
// into one, the only force push, guarded by a lease). While Git is
// unreachable only the latest document is kept; it is pushed once, as one
// commit, when Git returns. Metrics: flotilla_status_push_total{result},
// flotilla_status_push_duration_seconds, flotilla_status_pending.
// status.ShardURL spreads clusters over several status repos ({shard} in
// the URL) by a stable hash of the cluster name; the hub reads them all
// (status.ShardURLs).
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
package statuswriter
