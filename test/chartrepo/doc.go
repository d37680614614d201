// Package chartrepo packages chart directories into Helm chart archives and
// serves them as a real Helm chart repository (index.yaml plus .tgz) over
// loopback HTTP, for tests, benchmarks and refreshing the fleet-repo
// template's vendored charts. It writes the archive format by hand (tar.gz
// with a <chart>/ prefix) because only pkg/render may import the Helm SDK.
package chartrepo
