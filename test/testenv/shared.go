package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// Shared is one cluster the tests of a package share, started on first
// use (a run of tests that need no cluster costs nothing) and stopped by
// Close in TestMain; each test works in namespaces of its own:
//
//	var cluster = &testenv.Shared{Name: "apply", Options: testenv.ClusterOptions{Mode: testenv.Minimal}}
//
//	func TestMain(m *testing.M) { code := m.Run(); cluster.Close(code); os.Exit(code) }
//
//	func TestX(t *testing.T) { c := cluster.Get(t); … }
type Shared struct {
	// Name names the cluster's directories and logs.
	Name    string
	Options ClusterOptions
	// PerRun gives each run of a test (go test -count=N) a cluster of its
	// own, for tests whose leftovers (objects, an agent's trust state)
	// would change what the next run sees.
	PerRun bool

	mu       sync.Mutex
	seen     map[string]int     // runs of each test name so far
	runs     map[*testing.T]int // which run of its name each test is, from 0
	clusters []*sharedRun
}

type sharedRun struct {
	once    sync.Once
	cluster *Cluster
	err     error
}

// Get is the shared cluster of t's run, started if it is the first to
// ask. A cluster that cannot start fails t (with the "run `make tools`"
// hint when binaries are missing); under -short t is skipped.
func (s *Shared) Get(t *testing.T) *Cluster {
	t.Helper()
	NeedsCluster(t)
	r := s.runOf(t)
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		defer cancel()
		r.cluster, r.err = New(ctx, s.Name, "", s.Options)
		if r.err == nil {
			t.Logf("shared %s cluster ready in %s (%s)", s.Name, r.cluster.StartDuration().Round(time.Millisecond), r.cluster.timingSummary())
		}
	})
	if r.err != nil {
		t.Fatalf("testenv: %v", r.err)
	}
	return r.cluster
}

func (s *Shared) runOf(t *testing.T) *sharedRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	run := 0
	if s.PerRun {
		if s.runs == nil {
			s.seen, s.runs = map[string]int{}, map[*testing.T]int{}
		}
		var ok bool
		if run, ok = s.runs[t]; !ok {
			run = s.seen[t.Name()]
			s.seen[t.Name()]++
			s.runs[t] = run
		}
	}
	for len(s.clusters) <= run {
		s.clusters = append(s.clusters, &sharedRun{})
	}
	return s.clusters[run]
}

// Close stops every cluster Get started, printing the tail of each
// component log first when the package's tests failed (code is m.Run's).
func (s *Shared) Close(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.clusters {
		if r.cluster == nil {
			continue
		}
		if code != 0 {
			fmt.Fprintf(os.Stderr, "%s cluster component logs:\n%s\n", s.Name, r.cluster.LogTails(logTailLines))
		}
		if err := r.cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop %s cluster: %v\n", s.Name, err)
		}
	}
}
