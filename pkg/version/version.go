package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set with -ldflags "-X github.com/flotilla-gitops/flotilla/pkg/version.Version=v0.1.0";
// a binary built by `go install …@v0.1.0` (the template's CI jobs) takes
// the module version Go recorded instead of "dev".
var (
	Version = "dev"
	Commit  = "unknown"
)

func init() {
	if Version != "dev" {
		return
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		Version = moduleVersion(bi.Main.Version, Version)
	}
}

// moduleVersion is the main module's version as Go recorded it, or def
// when Go recorded none (a build inside the checkout says "(devel)").
func moduleVersion(recorded, def string) string {
	if recorded == "" || recorded == "(devel)" {
		return def
	}
	return recorded
}

// String is the one-line identity printed by `version` and written into status.
func String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s, %s, %s/%s)", binary, Version, Commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
