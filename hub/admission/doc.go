// Package admission owns turning a FleetPolicy into the native admission
// objects each target cluster's API server enforces by itself: a
// ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, CEL) and its
// ValidatingAdmissionPolicyBinding. No webhook runs anywhere.
//
// Built-in rules (noPrivileged, requiredLabels, allowedRegistries,
// resourceLimitsRequired) become generated CEL; raw CEL rules are passed
// through. Every expression — generated or written — is compiled at render
// time with the API server's own CEL environment
// (k8s.io/apiserver/pkg/admission/plugin/cel), in the NewExpressions mode
// a server uses for a new policy and at the compatibility version of the
// oldest target cluster, so an expression the clusters would refuse fails
// the render with the file, line and field that wrote it.
//
// Selecting the clusters and writing the objects into slices is
// hub/fleetrender's job.
package admission
