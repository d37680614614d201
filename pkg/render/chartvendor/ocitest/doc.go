// Package ocitest pushes packaged charts to an OCI registry with Helm's
// own registry client, as `helm push` does, for tests of oci:// chart
// vendoring (test/ociregistry starts the registry). It is test support;
// it lives under pkg/render because only that tree imports Helm.
package ocitest
