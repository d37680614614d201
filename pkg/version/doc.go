// Package version owns the build identity of the flotilla binaries. The
// Makefile sets Version and Commit with -ldflags; a plain `go build` reports
// "dev".
package version
