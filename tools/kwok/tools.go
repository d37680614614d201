//go:build tools

// Package kwok pins kwok, which plays the kubelets of the fake test nodes.
// The blank import keeps its dependencies in go.mod and go.sum; build.sh
// builds it with `go build` and copies its stage files next to it.
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
