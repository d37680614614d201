package flotilla

import (
	"embed"
	"io/fs"
)

// The all: prefix keeps dot files (.github/ workflows, .gitignore) that a
// fleet repo needs.
//
//go:embed all:fleet-repo-template
var fleetRepoTemplate embed.FS

//go:embed all:manifests/base all:manifests/overlays all:manifests/chart
var manifests embed.FS

// FleetRepoTemplate is fleet-repo-template/: a ready fleet repo.
func FleetRepoTemplate() fs.FS { return mustSub(fleetRepoTemplate, "fleet-repo-template") }

// Manifests is manifests/: base/ (the Kustomize base), overlays/ and chart/.
func Manifests() fs.FS { return mustSub(manifests, "manifests") }

// mustSub cannot fail: the directories are embedded, or the build fails.
func mustSub(f embed.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}
