package version

import (
	"fmt"
	"runtime"
)

// Set with -ldflags "-X github.com/flotilla-gitops/flotilla/pkg/version.Version=v0.1.0".
var (
	Version = "dev"
	Commit  = "unknown"
)

// String is the one-line identity printed by `version` and written into status.
func String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s, %s, %s/%s)", binary, Version, Commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
