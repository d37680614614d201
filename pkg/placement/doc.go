// Package placement owns the pure arithmetic of where workloads go: dividing
// a whole number of replicas across clusters by static weights (Karmada's
// Divided/Weighted replica scheduling, used by an Application's
// replicaScheduling and a Divided GlobalJob), a Volcano job's minimum gang
// (which pods, what they request) and its scaling into divided pieces, and
// BestFit, the one cluster whose known capacity fits a whole gang. It does
// no I/O: hub/fleetrender feeds it the repo and the clusters' reported capacity,
// agent/volcano the live nodes.
package placement
