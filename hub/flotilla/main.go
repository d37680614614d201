package main

import (
	"os"

	"github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/pkg/render"
)

func main() {
	// plan renders Helm units in worker processes re-executing this binary.
	render.ServeWorkerIfRequested()
	os.Exit(cmd.Execute())
}
