// Package pkg holds the libraries shared by the flotilla hub CLI and the
// flotilla-agent: one concept per package, see each package's doc.go.
package pkg
