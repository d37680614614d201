package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// The shipped DaemonSet's memory limit (manifests/base/daemonset.yaml) and
// what the agent derives from it inside that container: a Go soft limit of
// half of it and Helm workers of a quarter each (agent/cmd/memory.go).
// Outside a container the benchmark passes them explicitly.
const (
	shippedMemoryLimit  = 256 << 20
	shippedGoMemLimit   = "GOMEMLIMIT=128MiB"
	shippedHelmWorkerMB = "64Mi"
)

// BenchmarkDefaultInstall runs flotilla-agent as the shipped DaemonSet runs
// it (no transport flag: auto; the container's memory settings) for one
// cluster of a generated fleet of 1,000 and 10,000 clusters × 20
// applications whose slices `flotilla publish --remote` cut, against a Full
// test cluster (kwok nodes: its Deployments become available), Git status
// on. Measured, for a cold start (an empty cache: fetch, render, apply,
// health) and for a one-app change (app-01's image, merged and published):
// the agent's peak resident set (VmHWM, reset between the two) and the
// peak of the agent and its Helm workers together (sampled every 20 ms:
// what the container's limit counts), the bytes the Git server sent while
// the agent took the revision and pushed its status (its Git source's, in
// protocol v2, apart from its status writer's, in v0), and the publish
// time. Goals: the agent's peak
// ≤ 128 MiB, half the shipped limit; with its Helm workers, within the
// shipped 256 MiB.
func BenchmarkDefaultInstall(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) { benchDefaultInstall(b, n) })
	}
}

func benchDefaultInstall(b *testing.B, clusters int) {
	dir := b.TempDir()
	if err := Generate(dir, Spec{Clusters: clusters, Apps: 20}); err != nil {
		b.Fatal(err)
	}
	agentBenchRender(b, dir)
	srv := gitserver.Start(b, gitserver.ForgeConfig())
	url := srv.MustCreateRepo(b, "fleet", dir)
	tree := agentBenchTree(b, dir)
	// The cluster measured: the first whose slice app-01's change touches.
	cluster := ""
	for i := 0; i < clusters && cluster == ""; i++ {
		if strings.Contains(tree[slice.SlicePath(ClusterName(i))], AppName(1)) {
			cluster = ClusterName(i)
		}
	}
	if cluster == "" {
		b.Fatal("no cluster runs app-01")
	}
	// Every other cluster has reported status; this one is new.
	statusRefs(b, srv, "fleet", clusters, cluster)
	maintainer := agentproc.CredentialsDir(b, gitserver.Maintainer, srv.Password(gitserver.Maintainer))
	publisher := filepath.Join(b.TempDir(), "publisher")
	gitCLI(b, "", "clone", "-q", "--bare", srv.RepoPath("fleet"), publisher)
	publishTook := publish(b, publisher, url, maintainer)

	user := gitserver.AgentUser(cluster)
	if err := srv.AddUser(user, "bench-secret", gitserver.AgentRule(cluster)); err != nil {
		b.Fatal(err)
	}
	c := testenv.StartCluster(b, testenv.ClusterOptions{Mode: testenv.Full,
		Nodes: testenv.Nodes("kwok-node", 2, testenv.NodeSpec{CPU: "32", Memory: "128Gi", Pods: 200})})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	const agentNS = "flotilla-system"
	if err := c.CreateNamespace(ctx, agentNS); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	before := srv.Stats("fleet")
	p := agentproc.Start(b, agentproc.Options{
		Args: []string{"--kubeconfig", c.AdminKubeconfig(), "--cluster-name", cluster, "--repo-url", url,
			"--git-credentials-dir", agentproc.CredentialsDir(b, user, "bench-secret"), "--cache-dir", b.TempDir(),
			"--namespace", agentNS, "--helm-worker-memory", shippedHelmWorkerMB,
			"--metrics-addr", "127.0.0.1:0", "--health-addr", "0", "--log-format", "json", "--log-level", "debug"},
		Env: []string{shippedGoMemLimit}, ExtraArgsEnv: "FLOTILLA_BENCH_AGENT_ARGS", LogTail: -1,
	})
	treePeak := sampleTreeRSS(p)
	head := "main@sha1:" + srv.Head("fleet", "main")
	cold := waitApplied(b, p, 0, head, 15*time.Minute)
	waitStatusPushed(b, srv, cluster, head, 5*time.Minute)
	coldTook := time.Since(p.Started())
	coldGit := srv.Stats("fleet").Sub(before)
	coldPeak, coldTree := p.StatusKiB("VmHWM")<<10, treePeak.take()<<10
	b.StopTimer()
	if ref := lastSyncRef(p); ref != gitrepo.SliceRef(cluster) {
		b.Fatalf("the default install fetched %q, want its slice ref %s", ref, gitrepo.SliceRef(cluster))
	}

	// One application changes (app-01's image), merged and published.
	changeAppImage(b, dir)
	agentBenchRender(b, dir)
	if err := p.ResetPeakRSS(); err != nil {
		b.Fatal(err)
	}
	n := p.Cycles()
	before = srv.Stats("fleet")
	newHead, _, _ := agentBenchPush(b, srv, "fleet", dir, tree, "app-01: nginx 1.28")
	gitCLI(b, publisher, "fetch", "-q", srv.RepoPath("fleet"), "+refs/heads/main:refs/heads/main")
	republishTook := publish(b, publisher, url, maintainer)
	pushed := srv.Stats("fleet").Sub(before)
	b.StartTimer()
	change := waitApplied(b, p, n, "main@sha1:"+newHead, 10*time.Minute)
	waitStatusPushed(b, srv, cluster, "main@sha1:"+newHead, 5*time.Minute)
	changeGit := srv.Stats("fleet").Sub(before).Sub(pushed)
	changePeak, changeTree := p.StatusKiB("VmHWM")<<10, treePeak.take()<<10
	b.StopTimer()
	treePeak.stop()

	mib := func(n int64) float64 { return float64(n) / (1 << 20) }
	// The agent's Git source speaks protocol v2 (polls, slice fetches);
	// its status writer v0, whose fetch of its status ref and whose push
	// both read an advertisement of every ref of the repository (v2 has no
	// push), status and slice refs alike.
	source := func(g gitserver.Stats) int64 { return g.V2BytesSent }
	statusIO := func(g gitserver.Stats) int64 { return g.BytesSent - g.V2BytesSent }
	b.Logf("%s of %d clusters, default install (%s, --helm-worker-memory %s): %d units, cold start to applied, healthy and status pushed %s (cycle %s)",
		cluster, clusters, shippedGoMemLimit, shippedHelmWorkerMB, recInt(cold, "units"), coldTook.Round(time.Millisecond), recDuration(cold).Round(time.Millisecond))
	b.Logf("%-8s %14s %17s %19s %21s %10s", "phase", "agent peak RSS", "with Helm workers", "source bytes (v2)", "status bytes (v0)", "publish")
	b.Logf("%-8s %10.1f MiB %13.1f MiB %19d %14d (%d push) %10s", "cold", mib(coldPeak), mib(coldTree), source(coldGit), statusIO(coldGit), coldGit.ReceivePacks, publishTook.Round(time.Millisecond))
	b.Logf("%-8s %10.1f MiB %13.1f MiB %19d %14d (%d push) %10s", "one-app", mib(changePeak), mib(changeTree), source(changeGit), statusIO(changeGit), changeGit.ReceivePacks, republishTook.Round(time.Millisecond))
	b.Logf("one-app cycle %s; machine load %s", recDuration(change).Round(time.Millisecond), LoadAverage())
	b.ReportMetric(mib(coldPeak), "MiB-cold-peak-rss")
	b.ReportMetric(mib(coldTree), "MiB-cold-peak-rss-with-workers")
	b.ReportMetric(mib(changePeak), "MiB-change-peak-rss")
	b.ReportMetric(mib(changeTree), "MiB-change-peak-rss-with-workers")
	b.ReportMetric(float64(source(coldGit))/1024, "KiB-cold-source")
	b.ReportMetric(float64(source(changeGit))/1024, "KiB-change-source")
	b.ReportMetric(float64(statusIO(coldGit))/1024, "KiB-cold-status")
	b.ReportMetric(float64(statusIO(changeGit))/1024, "KiB-change-status")
	b.ReportMetric(publishTook.Seconds(), "s-publish")
	b.ReportMetric(republishTook.Seconds(), "s-publish-change")
	agentPeak, treePeakAll := max(coldPeak, changePeak), max(coldTree, changeTree)
	agentGoal(b, agentPeak > shippedMemoryLimit/2 || treePeakAll > shippedMemoryLimit,
		"agent peak RSS %.1f MiB (goal ≤ %d MiB), with its Helm workers %.1f MiB (goal ≤ the shipped limit, %d MiB)",
		mib(agentPeak), shippedMemoryLimit/2>>20, mib(treePeakAll), shippedMemoryLimit>>20)
}

// waitApplied waits, from the agent's (n+1)-th cycle on, for a successful
// cycle that applied revision and returns its record.
func waitApplied(b *testing.B, p *agentproc.Process, n int, revision string, timeout time.Duration) map[string]any {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rec := p.WaitCycle(n, time.Until(deadline))
		if rec["result"] == "success" && rec["appliedRevision"] == revision {
			return rec
		}
		n++
	}
}

// waitStatusPushed waits until the cluster's status ref on the server
// reports revision applied: the status push is part of what a revision
// costs the agent.
func waitStatusPushed(b *testing.B, srv *gitserver.Server, cluster, revision string, timeout time.Duration) {
	b.Helper()
	want := "appliedRevision: " + revision + "\n"
	deadline := time.Now().Add(timeout)
	for {
		out, err := exec.Command("git", "--git-dir="+srv.RepoPath("fleet"), "show", gitserver.StatusRef(cluster)+":"+status.FileName).Output()
		if err == nil && strings.Contains(string(out), want) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no status pushed for %s at %s within %s: %s", cluster, revision, timeout, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lastSyncRef is the ref of the agent's last Git sync (its debug log).
func lastSyncRef(p *agentproc.Process) string {
	recs := p.Records("git sync")
	if len(recs) == 0 {
		return ""
	}
	ref, _ := recs[len(recs)-1]["ref"].(string)
	return ref
}

// treeSampler keeps the peak of a process tree's resident set, sampled
// every 20 ms, since take.
type treeSampler struct {
	peak atomic.Int64
	done chan struct{}
	wg   sync.WaitGroup
}

func sampleTreeRSS(p *agentproc.Process) *treeSampler {
	s := &treeSampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if kib := p.TreeRSSKiB(); kib > s.peak.Load() {
				s.peak.Store(kib)
			}
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// take returns the peak in kB and starts a new one.
func (s *treeSampler) take() int64 { return s.peak.Swap(0) }

func (s *treeSampler) stop() {
	close(s.done)
	s.wg.Wait()
}
