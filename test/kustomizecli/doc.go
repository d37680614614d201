// Package kustomizecli runs the real kustomize CLI (built into bin/ by
// `make tools` from the pin in tools/kustomize) for tests: `kustomize build`
// of one tree, in a process of its own, is what `kubectl kustomize` gives a
// user, so renders are compared with the tool rather than with a reading of
// it.
package kustomizecli
