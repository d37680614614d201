// Package traffic owns turning a TrafficRoute into the Istio objects that
// carry it out on each target cluster: a networking.istio.io/v1
// VirtualService (hosts, gateways, HTTP routes with matches, weighted
// subsets and header changes) and a DestinationRule (the subsets, by
// version labels).
//
// The objects are unstructured, so Flotilla needs no Istio Go module; their
// shape is Istio's v1 API (see Objects). They are written deterministically
// — fields in a fixed order, one weight per line — so a canary step that
// changes only weights changes only those lines in rendered/.
//
// Routes are validated when hub/fleet loads them (weights summing to 100,
// subsets that exist); selecting clusters and writing slices is hub/fleetrender's
// job.
package traffic
