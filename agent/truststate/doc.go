// Package truststate keeps the agent's trust state in the cluster: the last
// accepted revision (reconciled while a newer head is refused) and strict
// signature verification's anchor (the last commit whose history was
// verified). Both live in one ConfigMap in the agent's namespace, shared by
// its replicas, so they survive pod restarts, leader failover and node
// drains, none of which an emptyDir cache does.
//
// Writes are optimistic: an update carries the resourceVersion it read and
// is retried on a conflict, so two replicas never overwrite each other's
// field. A value that is present but malformed is ErrCorrupt, never
// ignored: the caller fails closed.
package truststate
