package main

import (
	"os"

	"github.com/flotilla-gitops/flotilla/agent/cmd"
	"github.com/flotilla-gitops/flotilla/pkg/render"
)

func main() {
	// Helm templates run in worker processes re-executing this binary, so a
	// template that never ends can be killed.
	render.ServeWorkerIfRequested()
	os.Exit(cmd.Execute())
}
