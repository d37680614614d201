//go:build tools

// Package flux pins the Flux source-controller and kustomize-controller, the
// peer BenchmarkPeerFlux (test/bench) runs against flotilla-agent. Only the
// benchmark needs them: build.sh builds this group when named
// (`tools/build.sh bin flux`, `make bench-flux`), not for `make test`. The
// blank imports keep their dependencies in go.mod and go.sum; build.sh builds
// them with `go build` and copies their CRDs from the module cache.
package flux

import (
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
)
