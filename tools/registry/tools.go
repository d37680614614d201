//go:build tools

// Package registry pins the CNCF distribution registry the OCI chart tests
// push to and vendor from (started on loopback with basic auth and TLS by
// test/ociregistry).
package registry

import _ "github.com/distribution/distribution/v3/cmd/registry"
