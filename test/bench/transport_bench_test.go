package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// BenchmarkTransport measures what one agent's Git source transfers from a
// generated fleet repo of 1,000 and 10,000 clusters × 20 applications that
// also holds every cluster's status ref, with each transport:
//
//   - branch-v0: the whole tree of main over protocol v0 (the transport
//     before slices; every poll and fetch downloads every ref's
//     advertisement);
//   - branch-v2: the same tree over protocol v2 (ls-refs of main, fetch by
//     want/have);
//   - slice-v2: refs/flotilla/slices/<cluster> cut by `flotilla publish`
//     (the cluster's slice and the sources it reads, with the proof
//     against main), over protocol v2.
//
// Per transport: a cold fetch, an idle poll, and the incremental fetch
// after one commit that changes app-01's image on every cloud cluster
// (measured on the first cluster whose slice it changes). Bytes are the
// server's response bytes (Stats.BytesSent), all requests included.
// Memory is the Go heap's peak above its level before the fetch (sampled
// every 10 ms, in process). Goals at 10,000 clusters: cold ≤ 2× the slice
// plus its sources, incremental ≤ 2× the cluster's changed files, idle
// poll ≤ 1 KB, memory ≤ 64 MiB above steady.
func BenchmarkTransport(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) { benchTransport(b, n) })
	}
}

type transportMode struct {
	name     string
	ref      string // "" for the branch
	protocol string
}

type transportRun struct {
	cold, idle, incr gitserver.Stats
	coldHeap         uint64
	incrHeap         uint64
	coldTook         time.Duration
	sliceBytes       int64 // checkout bytes (slice mode: the slice and its sources)
	files            int
}

func benchTransport(b *testing.B, clusters int) {
	dir := b.TempDir()
	spec := Spec{Clusters: clusters, Apps: 20}
	if err := Generate(dir, spec); err != nil {
		b.Fatal(err)
	}
	renderTook := agentBenchRender(b, dir)
	srv := gitserver.Start(b, gitserver.ForgeConfig())
	url := srv.MustCreateRepo(b, "fleet", dir)
	tree := agentBenchTree(b, dir)
	statusRefs(b, srv, "fleet", clusters)

	creds := b.TempDir()
	for name, v := range map[string]string{"username": gitserver.Maintainer, "password": srv.Password(gitserver.Maintainer)} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte(v), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	// A v0 poll before any slice ref exists: the status refs' cost alone.
	st0 := srv.Stats("fleet")
	gitCLI(b, "", "-c", "protocol.version=0", "ls-remote", "-q", srv.UserURL("fleet", gitserver.Maintainer), "refs/heads/main")
	pollV0 := srv.Stats("fleet").Sub(st0)
	b.Logf("v0 poll before slices are published (main + %d status refs): %d bytes", clusters, pollV0.BytesSent)
	b.ReportMetric(float64(pollV0.BytesSent), "B-poll-v0-no-slice-refs")
	publisher := filepath.Join(b.TempDir(), "publisher")
	gitCLI(b, "", "clone", "-q", "--bare", srv.RepoPath("fleet"), publisher)
	st0 = srv.Stats("fleet")
	publishTook := publish(b, publisher, url, creds)
	pub := srv.Stats("fleet").Sub(st0)
	b.Logf("flotilla publish: %d pushes, %d KiB pushed, %d KiB of advertisement read", pub.ReceivePacks, pub.ReceivePackBytes>>10, (pub.BytesSent)>>10)
	b.ReportMetric(float64(pub.ReceivePackBytes)/1024, "KiB-publish-push")
	b.Logf("fleet repo: %d clusters × %d apps rendered in %s, %d files; %d status refs; flotilla publish (cut + push of %d slice refs) %s",
		clusters, spec.Apps, renderTook.Round(time.Millisecond), len(tree), clusters, clusters, publishTook.Round(time.Millisecond))

	// The cluster measured: the first whose slice app-01's change touches.
	before := tree
	auth := gitrepo.Auth{Username: gitserver.Maintainer, Password: srv.Password(gitserver.Maintainer)}
	modes := []transportMode{
		{name: "branch-v0", protocol: gitrepo.ProtocolV0},
		{name: "branch-v2", protocol: gitrepo.ProtocolV2},
		{name: "slice-v2", protocol: gitrepo.ProtocolV2},
	}
	cluster := ""
	for i := 0; i < clusters && cluster == ""; i++ {
		if strings.Contains(before[slice.SlicePath(ClusterName(i))], AppName(1)) {
			cluster = ClusterName(i)
		}
	}
	if cluster == "" {
		b.Fatal("no cluster runs app-01")
	}
	modes[2].ref = gitrepo.SliceRef(cluster)
	ctx := context.Background()
	sources := make([]*gitrepo.Source, len(modes))
	runs := make([]transportRun, len(modes))

	b.ResetTimer()
	for i, m := range modes {
		sources[i] = &gitrepo.Source{URL: url, Auth: auth, CacheDir: b.TempDir(), Timeout: 10 * time.Minute, Ref: m.ref, Protocol: m.protocol}
		st0 := srv.Stats("fleet")
		start := time.Now()
		var res gitrepo.Result
		runs[i].coldHeap = heapPeak(func() {
			var err error
			if res, err = sources[i].Sync(ctx); err != nil {
				b.Fatalf("%s: cold sync: %v", m.name, err)
			}
		})
		runs[i].coldTook = time.Since(start)
		runs[i].cold = srv.Stats("fleet").Sub(st0)
		runs[i].sliceBytes, runs[i].files = dirSize(b, res.Dir)
		st0 = srv.Stats("fleet")
		if _, err := sources[i].Sync(ctx); err != nil {
			b.Fatalf("%s: idle poll: %v", m.name, err)
		}
		runs[i].idle = srv.Stats("fleet").Sub(st0)
	}
	b.StopTimer()

	// The change: app-01's image on every cloud cluster, rendered, merged,
	// published.
	changeAppImage(b, dir)
	agentBenchRender(b, dir)
	head, after, changedAll := agentBenchPush(b, srv, "fleet", dir, before, "app-01: nginx 1.28")
	gitCLI(b, publisher, "fetch", "-q", srv.RepoPath("fleet"), "+refs/heads/main:refs/heads/main")
	st0 = srv.Stats("fleet")
	republishTook := publish(b, publisher, url, creds)
	repub := srv.Stats("fleet").Sub(st0)
	b.Logf("flotilla publish after the change: %d pushes, %d KiB pushed", repub.ReceivePacks, repub.ReceivePackBytes>>10)
	b.ReportMetric(float64(repub.ReceivePackBytes)/1024, "KiB-republish-push")
	// The cluster's changed files: files under its slice's paths that differ.
	s, err := slice.Read(dir, cluster)
	if err != nil {
		b.Fatal(err)
	}
	var changedBytes int64
	changedFiles := 0
	for p, c := range after {
		for _, sp := range s.RepoPaths() {
			if p == sp || strings.HasPrefix(p, sp+"/") {
				if before[p] != c {
					changedBytes += int64(len(c))
					changedFiles++
				}
				break
			}
		}
	}
	b.StartTimer()
	for i, m := range modes {
		st0 := srv.Stats("fleet")
		var res gitrepo.Result
		runs[i].incrHeap = heapPeak(func() {
			if res, err = sources[i].Sync(ctx); err != nil {
				b.Fatalf("%s: incremental sync: %v", m.name, err)
			}
		})
		runs[i].incr = srv.Stats("fleet").Sub(st0)
		if res.Hash != head {
			b.Fatalf("%s: synced %s, want main's head %s", m.name, res.Hash, head)
		}
	}
	b.StopTimer()

	b.Logf("commit: %d files changed in the fleet; %s's slice: %d of them, %d bytes; re-publish %s",
		changedAll, cluster, changedFiles, changedBytes, republishTook.Round(time.Millisecond))
	sliceBytes := runs[2].sliceBytes
	b.Logf("%s's slice with its sources: %d files, %d KiB", cluster, runs[2].files, sliceBytes>>10)
	b.Logf("%-10s %14s %8s %16s %10s %14s %14s %14s", "transport", "cold bytes", "×slice", "incremental", "×changed", "idle poll", "heap cold", "heap incr")
	for i, m := range modes {
		r := runs[i]
		b.Logf("%-10s %14d %8.1f %16d %10.1f %14s %14s %14s", m.name,
			r.cold.BytesSent, float64(r.cold.BytesSent)/float64(sliceBytes),
			r.incr.BytesSent, float64(r.incr.BytesSent)/float64(max(changedBytes, 1)),
			fmt.Sprintf("%d B/%d req", r.idle.BytesSent, r.idle.InfoRefs+r.idle.LsRefs+r.idle.UploadPacks),
			fmt.Sprintf("%.1f MiB", float64(r.coldHeap)/(1<<20)), fmt.Sprintf("%.1f MiB", float64(r.incrHeap)/(1<<20)))
		b.ReportMetric(float64(r.cold.BytesSent)/1024, "KiB-cold-"+m.name)
		b.ReportMetric(float64(r.incr.BytesSent)/1024, "KiB-incr-"+m.name)
		b.ReportMetric(float64(r.idle.BytesSent), "B-poll-"+m.name)
		b.ReportMetric(float64(r.coldHeap)/(1<<20), "MiB-heap-cold-"+m.name)
	}
	b.ReportMetric(float64(sliceBytes)/1024, "KiB-slice")
	b.ReportMetric(float64(changedBytes), "B-changed")
	b.ReportMetric(publishTook.Seconds(), "s-publish")
	b.Logf("load average %s", LoadAverage())
}

// statusRefs gives the fleet repo name one status ref per cluster, as when the
// agents write status there (what a v0 poll downloads the names of).
func statusRefs(b *testing.B, srv *gitserver.Server, name string, clusters int, except ...string) {
	b.Helper()
	repo := srv.RepoPath(name)
	// One small status commit for all of them, as an agent's is (a ref
	// pointing at main would make a status writer fetch main's tree).
	git := func(stdin string, args ...string) string {
		cmd := exec.Command("git", append([]string{"--git-dir=" + repo, "-c", "user.name=agent", "-c", "user.email=agent@example.com"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	blob := git("apiVersion: flotilla.dev/v1alpha1\nkind: ClusterStatus\n", "hash-object", "-w", "--stdin")
	tree := git("100644 blob "+blob+"\tstatus.yaml\n", "mktree")
	commit := git("", "commit-tree", tree, "-m", "status")
	var in strings.Builder
	for i := 0; i < clusters; i++ {
		if !slices.Contains(except, ClusterName(i)) {
			fmt.Fprintf(&in, "create %s %s\n", gitserver.StatusRef(ClusterName(i)), commit)
		}
	}
	git(in.String(), "update-ref", "--stdin")
}

// changeAppImage makes the one-app change the benchmarks measure in a
// generated fleet: app-01's image, nginx 1.27 → 1.28, wherever it runs
// (every cloud cluster). The caller renders and pushes it.
func changeAppImage(b *testing.B, dir string) {
	b.Helper()
	app := filepath.Join(dir, "apps", AppName(1), "manifests", "deployment.yaml")
	data, err := os.ReadFile(app)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(app, []byte(strings.Replace(string(data), "nginx:1.27", "nginx:1.28", 1)), 0o644); err != nil {
		b.Fatal(err)
	}
}

// publish runs bin/flotilla publish in the publisher's clone.
func publish(b *testing.B, repo, url, creds string) time.Duration {
	b.Helper()
	start := time.Now()
	cmd := exec.Command(flotilla(b), "publish", "--repo", repo, "--rev", "main", "--remote", url, "--git-credentials-dir", creds, "--timeout", "20m")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("flotilla publish: %v\n%s", err, out)
	}
	return time.Since(start)
}

func gitCLI(b *testing.B, dir string, args ...string) string {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// heapPeak runs f and returns the Go heap's peak above its level before,
// sampled every 10 ms.
func heapPeak(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > base && m.HeapInuse-base > peak.Load() {
				peak.Store(m.HeapInuse - base)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(done)
	wg.Wait()
	return peak.Load()
}
