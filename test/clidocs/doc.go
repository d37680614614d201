// Package clidocs keeps docs/cli/ — the Markdown reference of the flotilla
// and flotilla-agent commands — generated from their cobra definitions:
// its test fails when the files are stale, and `go test ./test/clidocs
// -update` rewrites them.
package clidocs
