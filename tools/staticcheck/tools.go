//go:build tools

// Package staticcheck pins the linter `make lint` runs. The blank import
// keeps its dependencies in go.mod and go.sum; build.sh builds it with
// `go build`.
package staticcheck

import (
	_ "honnef.co/go/tools/cmd/staticcheck"
)
