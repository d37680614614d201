// Package version owns the build identity of the flotilla binaries. The
// Makefile sets Version and Commit with -ldflags; `go install …@VERSION`
// reports the module version; a plain `go build` reports "dev".
package version
