package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// Generous regression bounds on an idle agent process managing one unit.
// The benchmark's figures (test/results/bench-agent-memory.md, 4,000
// objects) are 19 MiB resident between cycles, 2.5 MiB of it the
// executable's pages; before the agent handed its memory back after each
// cycle they were 64 MiB and 46 MiB.
const (
	idleRSSBound        = 64 << 20
	idleExecutableBound = 16 << 20
)

// TestAgentMemoryBetweenCycles: after a cycle the agent hands back its
// heap and the executable pages the cycle faulted in (agent/procmem), and
// goes on working from there: it corrects drift, faulting back the code it
// runs.
func TestAgentMemoryBetweenCycles(t *testing.T) {
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	k := c.Client()
	srv := agentGit(t)
	const cluster, ns, agentNS, identity = "memory", "memory-app", "flotilla-memory", "memory-a"
	_, repo, creds := handAgentFleet(t, c, srv, cluster, ns, agentNS)
	p := startAgentProc(t, c, repo, cluster, agentNS, identity, t.TempDir(), creds, "--interval", "2s")
	waitColor(t, k, ns, "blue", 2*time.Minute)

	exe := agentproc.Binary(t)
	for round := range 2 {
		waitFor(t, time.Minute, fmt.Sprintf("round %d: an idle agent's memory within bounds", round), func() (bool, string) {
			rss, exeRSS := p.StatusKiB("VmRSS")<<10, p.MappedKiB(exe)<<10
			return rss > 0 && rss <= idleRSSBound && exeRSS <= idleExecutableBound,
				fmt.Sprintf("RSS %d MiB (bound %d), executable's pages %d MiB (bound %d)", rss>>20, idleRSSBound>>20, exeRSS>>20, idleExecutableBound>>20)
		})
		// Drift is corrected with the pages dropped.
		editColor(t, k, ns, "red")
		waitColor(t, k, ns, "blue", 2*time.Minute)
	}
	if !p.running() {
		t.Fatalf("agent exited:\n%s", p.LogTail(30))
	}
}
