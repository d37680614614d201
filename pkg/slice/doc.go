// Package slice is the per-cluster slice contract between the hub, which
// writes rendered/<bucket>/<cluster>/, and the agent, which reads its
// cluster's slice.yaml and hands each unit to pkg/render: the Slice and
// Unit types, the rendered/ tree layout and unit naming, and the slice.yaml
// encoding (Marshal) and strict decoding (Read, Parse, Validate), and the
// rule by which an agent holds a prune of most of a cluster (HoldsPrune).
//
// It imports nothing of the fleet model, so the agent links only this;
// the compiler that produces slices is hub/fleetrender, which only the hub
// links.
package slice
