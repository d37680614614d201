package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestHubLinksNoAgentCode: the hub's binary links nothing under agent/.
// What both sides run is under pkg/; the agent's own code (the loop,
// apply, Volcano, trust state, the status writer) is the agent's business,
// and the hub learns what it did only from Git.
func TestHubLinksNoAgentCode(t *testing.T) {
	const agentSide = "github.com/flotilla-gitops/flotilla/agent/"
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps printed %d packages; is this the hub?", len(deps))
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, agentSide) {
			t.Errorf("the hub links %s, which is the agent's", dep)
		}
	}
}
