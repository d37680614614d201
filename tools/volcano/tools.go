//go:build tools

// Package volcano pins the Volcano scheduler and controller manager that do
// gang scheduling in the full test clusters. The blank imports keep their
// dependencies in go.mod and go.sum; build.sh builds them with `go build`
// and copies Volcano's CRDs and default scheduler config next to them.
package volcano

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
