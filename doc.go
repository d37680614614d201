// Package flotilla holds the files that the flotilla binaries carry inside
// them: the fleet repo template (`flotilla init`) and the agent's install
// manifests (`flotilla bootstrap`). Go's embed cannot reach outside the
// embedding package's directory, so they are embedded here, at the module
// root, where both directories live; the Go code that uses them is in
// hub/bootstrap.
package flotilla
