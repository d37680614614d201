// Package status owns the ClusterStatus document an agent commits to its
// own Git ref (refs/heads/flotilla/status/<cluster>): its format, its
// conditions and their reasons. It is the half of the Git contract that
// runs from the agent to the hub, and it does no I/O: the agent's writer
// that commits it is agent/statuswriter; the hub's reading of every
// cluster's document into the fleet view, and the judging of status
// commits, are in hub/fleetview.
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
// # Reasons
//
// A Ready=False condition names its reason (Reason* in types.go). Failure
// is an error that carries one, and whether it stalls (only a change in
// Git can fix it): agent/apply, pkg/render, agent/volcano and agent/verify
// return their errors as Failures (Stalling, Retrying), chosen where they
// know why they failed, and the agent reads them with FailureOf.
//
// # Reading the conditions
//
// UnitReady, UnitFailing, UnitFailure and ClusterFailure say how a
// document's conditions read; the writer's commit messages and the hub's
// fleet view both use them.
package status
