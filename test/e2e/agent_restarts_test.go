package e2e_test

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAgentRestartCause: the agent binary exits with code 1 when it loses
// its lease, and the restarted process (same cache, as after a container
// restart) reports why it exited before — lease lost, then a SIGTERM, then
// a SIGKILL that left no record — in flotilla_agent_restarts_total and
// flotilla_agent_last_exit_cause.
func TestAgentRestartCause(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	srv := agentGit(t)
	const cluster, ns, agentNS, identity = "restarts", "restarts-app", "flotilla-restarts", "restarts-a"
	_, repo, creds := handAgentFleet(t, c, srv, cluster, ns, agentNS)
	cache := t.TempDir()
	start := func() *agentProc {
		return startAgentProc(t, c, repo, cluster, agentNS, identity, cache, creds, "--interval", "2s", "--leader-elect",
			"--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "1s")
	}
	// waitRestarts waits until the process reports these exit counts and
	// last cause.
	waitRestarts := func(p *agentProc, want map[string]float64, last string) {
		t.Helper()
		waitFor(t, time.Minute, fmt.Sprintf("restarts %v, last %s", want, last), func() (bool, string) {
			got := map[string]float64{}
			for _, cause := range []string{"lease-lost", "signal", "error", "unknown"} {
				if v, ok := p.metric(`flotilla_agent_restarts_total{cause="` + cause + `"}`); ok {
					got[cause] = v
				}
			}
			v, _ := p.metric(`flotilla_agent_last_exit_cause{cause="` + last + `"}`)
			return fmt.Sprint(got) == fmt.Sprint(want) && v == 1, fmt.Sprintf("restarts %v, last %s = %v", got, last, v)
		})
	}

	a := start()
	waitFor(t, time.Minute, "the agent to lead", func() (bool, string) {
		h := leaseHolder(t, k, agentNS, "flotilla-agent")
		return h == identity, "holder " + h
	})
	if v, ok := a.metric(`flotilla_agent_restarts_total{cause="lease-lost"}`); ok {
		t.Fatalf("a first start reports restarts: %v", v)
	}

	// Another holder takes the lease, as after an API server outage longer
	// than the renew deadline: the agent exits 1.
	lease := &coordinationv1.Lease{}
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: agentNS, Name: "flotilla-agent"}, lease); err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = ptr.To("intruder")
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](20)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if err := k.Update(testCtx(t), lease); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("the agent did not exit after losing its lease")
	}
	if code := a.terminate(time.Second); code != 1 {
		t.Fatalf("exit code after losing the lease: %d, want 1", code)
	}

	b := start()
	waitRestarts(b, map[string]float64{"lease-lost": 1}, "lease-lost")
	if code := b.terminate(time.Minute); code != 0 {
		t.Fatalf("exit code after SIGTERM: %d, want 0", code)
	}
	d := start()
	waitRestarts(d, map[string]float64{"lease-lost": 1, "signal": 1}, "signal")
	d.kill()
	e := start()
	waitRestarts(e, map[string]float64{"lease-lost": 1, "signal": 1, "unknown": 1}, "unknown")
}
