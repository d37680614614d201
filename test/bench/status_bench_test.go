package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
)

// statusReadGoal is the goal for `flotilla status` over 1,000
// clusters from a local repository.
const statusReadGoal = 5 * time.Second

func percentile(ds []time.Duration, p int) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	i := len(ds) * p / 100
	if i >= len(ds) {
		i = len(ds) - 1
	}
	return ds[i]
}

// BenchmarkStatusPushContention: 200 agents, each with the real writer and
// its own credentials, push 3 status documents each at once to one local
// Git server (git http-backend, per-agent push rules in the pre-receive
// hook). A push that fails (a timeout on an overloaded machine) is retried
// as the agent's writer retries a pending document. Every last document
// must land and no other ref may move. Reports pushes/s and the latency of
// a Publish (including such retries) at p50 and p99.
func BenchmarkStatusPushContention(b *testing.B) {
	const agents, rounds = 200, 3
	for i := 0; i < b.N; i++ {
		clusters := make([]string, agents)
		for j := range clusters {
			clusters[j] = ClusterName(j)
		}
		srv := gitserver.Start(b, gitserver.ForgeConfig(clusters...))
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("fleet\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		url := srv.MustCreateRepo(b, "fleet", dir)
		mainBefore := srv.Head("fleet", "main")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		rev := "main@sha1:" + mainBefore
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			latencies []time.Duration
			failures  []string
			retried   int
		)
		gate := make(chan struct{})
		for _, c := range clusters {
			w, err := statuswriter.NewWriter(statuswriter.WriterOptions{Cluster: c, URL: url, Timeout: 2 * time.Minute,
				Auth: statusdoc.AgentAuth(srv, c)})
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				for r := 1; r <= rounds; r++ {
					start := time.Now()
					err := w.Publish(ctx, StatusDoc(c, rev, 20, r))
					// As the agent's writer does in Run: a document that
					// could not be pushed stays pending and is retried.
					for attempt := 0; err != nil && attempt < 5; attempt++ {
						mu.Lock()
						retried++
						mu.Unlock()
						_, err = w.Flush(ctx, false)
					}
					mu.Lock()
					latencies = append(latencies, time.Since(start))
					if err != nil {
						failures = append(failures, fmt.Sprintf("%s round %d: %v", c, r, err))
					}
					mu.Unlock()
				}
			}()
		}
		b.ResetTimer()
		began := time.Now()
		close(gate)
		wg.Wait()
		elapsed := time.Since(began)
		b.StopTimer()
		for _, f := range failures {
			b.Error(f)
		}
		refs, err := gitrepo.ReadRefs(ctx, srv.RepoPath("fleet"), "refs/", gitrepo.ReadOptions{File: status.FileName})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		landed := 0
		for _, rf := range refs {
			if rf.Ref == "refs/heads/main" {
				if rf.Hash != mainBefore {
					b.Errorf("main moved")
				}
				continue
			}
			doc, err := status.Decode(rf.File)
			if err != nil || rf.Ref != status.RefFor(doc.Cluster) || doc.Units[0].Name != AppName(0)+fmt.Sprintf("-r%d", rounds) {
				b.Errorf("%s does not hold its agent's last document (%v)", rf.Ref, err)
				continue
			}
			landed++
		}
		if len(refs) != agents+1 || landed != agents {
			b.Errorf("%d refs, %d last documents landed; want %d status refs and main", len(refs), landed, agents)
		}
		st := srv.Stats("fleet")
		pushes := float64(agents * rounds)
		b.ReportMetric(pushes/elapsed.Seconds(), "pushes/s")
		b.ReportMetric(float64(percentile(latencies, 50).Milliseconds()), "p50-ms")
		b.ReportMetric(float64(percentile(latencies, 99).Milliseconds()), "p99-ms")
		b.ReportMetric(float64(st.ReceivePackBytes)/pushes, "bytes-pushed/commit")
		b.ReportMetric(float64(retried), "retried-pushes")
		b.Logf("%d agents × %d documents in %v: %.1f pushes/s, p50 %v, p99 %v, max %v; %d receive-packs, %d fetches (first use, or after a failed push), %d pushes retried; %d of %d last documents landed; load average %s",
			agents, rounds, elapsed.Round(time.Millisecond), pushes/elapsed.Seconds(),
			percentile(latencies, 50).Round(time.Millisecond), percentile(latencies, 99).Round(time.Millisecond),
			percentile(latencies, 100).Round(time.Millisecond), st.ReceivePacks, st.UploadPacks, retried, landed, agents, LoadAverage())
	}
}

// BenchmarkStatusHeartbeat: the cost of one agent's status traffic with a
// 20-unit document: the first commit, a cycle with no change (nothing
// sent), a heartbeat (one small commit) and a meaningful change.
func BenchmarkStatusHeartbeat(b *testing.B) {
	for i := 0; i < b.N; i++ {
		srv := gitserver.Start(b, gitserver.ForgeConfig("member1"))
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("fleet\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		url := srv.MustCreateRepo(b, "fleet", dir)
		rev := "main@sha1:" + srv.Head("fleet", "main")
		now := benchT0
		w, err := statuswriter.NewWriter(statuswriter.WriterOptions{Cluster: "member1", URL: url, HeartbeatJitter: -1, Now: func() time.Time { return now },
			Auth: statusdoc.AgentAuth(srv, "member1")})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		step := func(name string, doc *status.ClusterStatus, wantPush bool) gitserver.Stats {
			before := srv.Stats("fleet")
			start := time.Now()
			res, err := w.PublishResult(ctx, doc)
			took := time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			if res.Pushed != wantPush {
				b.Errorf("%s: pushed %v, want %v", name, res.Pushed, wantPush)
			}
			d := srv.Stats("fleet").Sub(before)
			b.Logf("%-10s %v: %d requests (%d info/refs, %d ls-refs, %d fetch, %d push), %d bytes sent to the server, %d bytes pack pushed, %d bytes received",
				name, took.Round(time.Millisecond), peerRequests(d),
				d.InfoRefs+d.ReceivePackInfoRefs, d.LsRefs, d.UploadPacks, d.ReceivePacks, d.BytesReceived, d.ReceivePackBytes, d.BytesSent)
			return d
		}
		doc := StatusDoc("member1", rev, 20, 1)
		encoded, err := status.Encode(doc)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("status.yaml with 20 units, 2 jobs and a capacity snapshot: %d bytes", len(encoded))
		b.ReportMetric(float64(len(encoded)), "status.yaml-bytes")
		step("first", doc, true)
		now = now.Add(time.Minute)
		if d := step("no change", doc, false); d != (gitserver.Stats{}) {
			b.Errorf("a cycle without change made requests: %+v", d)
		}
		now = now.Add(status.DefaultHeartbeatInterval)
		hb := step("heartbeat", doc, true)
		if hb.ReceivePacks != 1 || hb.UploadPacks != 0 || hb.ReceivePackBytes > 4096 {
			b.Errorf("a heartbeat cost %+v, want one small push (at most 4 KiB)", hb)
		}
		b.ReportMetric(float64(hb.ReceivePackBytes), "heartbeat-bytes-pushed")
		b.ReportMetric(float64(hb.BytesReceived+hb.BytesSent), "heartbeat-bytes-total")
		now = now.Add(time.Minute)
		ch := step("change", StatusDoc("member1", rev, 20, 2), true)
		b.ReportMetric(float64(ch.ReceivePackBytes), "change-bytes-pushed")
	}
}

// BenchmarkStatusRead1000 runs the built `flotilla status -o json` on a
// local bare fleet repo of 1,000 clusters, each with a 20-unit status ref,
// where 10 slices changed after most agents applied (so the view needs a
// tree diff). Goal: ≤ 5 s. It also measures what the 1,000 status refs
// cost every agent's poll when they live in the fleet repo (the ref
// advertisement of one ls-remote).
func BenchmarkStatusRead1000(b *testing.B) {
	const clusters = 1000
	bin := flotilla(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srv := gitserver.Start(b, gitserver.ForgeConfig("cluster-00000"))
		repo, c2 := StatusFleetRepo(b, srv, clusters)
		b.StartTimer()

		// In process first (go test -cpuprofile shows where the time goes).
		start := time.Now()
		if _, err := fleetview.Read(context.Background(), fleetview.ReadOptions{Repo: repo}); err != nil {
			b.Fatal(err)
		}
		inProcess := time.Since(start)
		b.ReportMetric(inProcess.Seconds(), "s/read-in-process")

		cmd := exec.Command(bin, "status", "--repo", repo, "-o", "json")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start = time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatalf("flotilla status: %v\n%s", err, stderr.String())
		}
		var v fleetview.View
		if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
			b.Fatal(err)
		}
		if len(v.Clusters) != clusters || v.Summary[fleetview.StateInSync] != clusters-10 || v.Summary[fleetview.StateBehind] != 10 {
			b.Errorf("view: %d clusters, summary %v; want %d, %d InSync, 10 Behind", len(v.Clusters), v.Summary, clusters, clusters-10)
		}
		var rss int64
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = int64(ru.Maxrss) * 1024
		}
		// CPU time does not depend on what else the machine runs; on an
		// idle machine the wall time is about this divided by the cores
		// the reader keeps busy.
		cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		b.ReportMetric(cpu.Seconds(), "cpu-s/status-1000")
		b.ReportMetric(wall.Seconds(), "s/status-1000")
		b.ReportMetric(float64(rss)/(1<<20), "MiB-peak-rss")
		verdict := "within"
		if wall > statusReadGoal {
			verdict = "MISSED"
			if os.Getenv("FLOTILLA_BENCH_ENFORCE") == "1" {
				b.Errorf("flotilla status over %d clusters took %v, goal ≤ %v", clusters, wall, statusReadGoal)
			}
		}
		b.Logf("flotilla status over %d clusters (20 units each) from a local repo: %v wall, %v CPU, peak RSS %d MiB (%s the %v goal); fleetview.Read in process %v; load average %s",
			clusters, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), rss>>20, verdict, statusReadGoal, inProcess.Round(time.Millisecond), LoadAverage())

		// Rollout of the commit that changed 10 slices.
		start = time.Now()
		out, err := exec.Command(bin, "status", "rollout", c2, "--repo", repo, "-o", "json").Output()
		if err != nil {
			b.Fatalf("flotilla status rollout: %v", err)
		}
		var r fleetview.RolloutView
		if err := json.Unmarshal(out, &r); err != nil {
			b.Fatal(err)
		}
		if r.Summary[fleetview.RolloutUnaffected] != clusters-10 {
			b.Errorf("rollout summary %v", r.Summary)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/rollout-1000")

		// An agent's poll of a fleet repo holding the 1,000 status refs.
		src := &gitrepo.Source{URL: srv.URL("fleet"), CacheDir: b.TempDir(),
			Auth: statusdoc.AgentAuth(srv, "cluster-00000")}
		if _, err := src.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		before := srv.Stats("fleet")
		if _, err := src.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		poll := srv.Stats("fleet").Sub(before)
		b.ReportMetric(float64(poll.BytesSent), "poll-bytes-with-1000-status-refs")
		b.Logf("an agent's poll (ls-remote) of the fleet repo with %d status refs in it: %d bytes", clusters, poll.BytesSent)
	}
}
