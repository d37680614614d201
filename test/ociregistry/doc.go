// Package ociregistry starts a real OCI registry for tests: the CNCF
// distribution registry (bin/registry, built by `tools/build.sh bin
// registry`) on loopback, serving TLS with a certificate from a CA it
// generates and requiring htpasswd basic auth (bcrypt). Clients trust the
// CA through its file (CAFile) instead of skipping verification, and log
// in with Username and Password, or through a Docker-format registry config
// (ConfigFile).
//
// It does not push anything: pushing a chart uses Helm's registry client,
// which only packages under pkg/render import.
package ociregistry
