package statuswriter

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
)

// TestContention: 50 agents, each with its own writer and credentials,
// push three status documents each, all at once, to one repository. Every
// last document lands on its own ref and no other ref moves. (The 200-agent
// version with figures is BenchmarkStatusPushContention in test/bench.)
func TestContention(t *testing.T) {
	if testing.Short() {
		t.Skip("150 pushes")
	}
	const agents, rounds = 50, 3
	clusters := make([]string, agents)
	for i := range clusters {
		clusters[i] = fmt.Sprintf("c%03d", i)
	}
	srv, url := startForge(t, nil, clusters...)
	mainBefore := srv.Head("fleet", "main")
	// A bound for a wedged run, not a speed requirement.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		latencies []time.Duration
		errs      []error
	)
	start := make(chan struct{})
	for _, c := range clusters {
		w, err := NewWriter(WriterOptions{Cluster: c, URL: url, Auth: statusdoc.AgentAuth(srv, c), Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for r := 1; r <= rounds; r++ {
				t0 := time.Now()
				err := w.Publish(ctx, statusdoc.Ready(c, rev1, fmt.Sprintf("round-%d", r)))
				// A push that timed out on a busy machine stays pending
				// and is retried, as the agent's Run does, as often as it
				// takes: a retry count would be a speed requirement.
				for errors.Is(err, gitrepo.ErrUnreachable) && ctx.Err() == nil {
					_, err = w.Flush(ctx, false)
				}
				mu.Lock()
				latencies = append(latencies, time.Since(t0))
				if err != nil {
					errs = append(errs, fmt.Errorf("%s round %d: %w", c, r, err))
				}
				mu.Unlock()
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	for _, err := range errs {
		t.Error(err)
	}

	refs, err := gitrepo.ReadRefs(ctx, srv.RepoPath("fleet"), "refs/", gitrepo.ReadOptions{File: status.FileName})
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != agents+1 {
		t.Errorf("%d refs, want %d status refs and main", len(refs), agents)
	}
	for _, rf := range refs {
		if rf.Ref == "refs/heads/main" {
			if rf.Hash != mainBefore {
				t.Errorf("main moved: %s → %s", mainBefore, rf.Hash)
			}
			continue
		}
		cluster := rf.Ref[len(status.RefPrefix):]
		doc, err := status.Decode(rf.File)
		if err != nil {
			t.Errorf("%s: %v", rf.Ref, err)
			continue
		}
		if doc.Cluster != cluster || doc.Units[0].Name != fmt.Sprintf("round-%d", rounds) {
			t.Errorf("%s holds %s's document of %s, not its last", rf.Ref, doc.Cluster, doc.Units[0].Name)
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	p99 := latencies[len(latencies)*99/100]
	t.Logf("%d agents × %d pushes in %v: %.1f pushes/s, p50 %v, p99 %v", agents, rounds, elapsed.Round(time.Millisecond),
		float64(len(latencies))/elapsed.Seconds(), latencies[len(latencies)/2].Round(time.Millisecond), p99.Round(time.Millisecond))
	if st := srv.Stats("fleet"); st.ReceivePacks < agents*rounds {
		t.Errorf("%d pushes reached the server, want at least %d (one per document)", st.ReceivePacks, agents*rounds)
	}
}
