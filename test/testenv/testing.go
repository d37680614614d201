package testenv

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// StartTimeout bounds StartCluster; full mode normally needs well under a
// minute, the rest is headroom for a loaded CI machine.
const StartTimeout = 3 * time.Minute

// logTailLines is how much of each component log a failed test shows.
const logTailLines = 60

// NeedsCluster skips t under `go test -short`: `make test-unit` runs every
// test that needs no cluster, on a clone whose bin/ tools are not built yet;
// `make test` (never -short) runs the rest. Call it first in every helper
// that starts or shares a cluster.
func NeedsCluster(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a cluster: skipped by -short (make test-unit); make test runs it")
	}
}

// StartCluster starts a cluster for the test and stops it in t.Cleanup,
// printing the tail of every component log first when the test failed.
// A missing binary fails the test with a hint to run `make tools`.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	return StartClusters(t, 1, opts)[0]
}

// StartClusters starts n independent clusters concurrently, named after the
// test with suffixes -0 … -(n-1).
func StartClusters(t testing.TB, n int, opts ClusterOptions) []*Cluster {
	t.Helper()
	NeedsCluster(t)
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			var cancelDeadline context.CancelFunc
			ctx, cancelDeadline = context.WithDeadline(ctx, deadline)
			defer cancelDeadline()
		}
	}
	clusters := make([]*Cluster, n)
	errs := make([]error, n)
	dirs := make([]string, n)
	for i := range n {
		dirs[i] = t.TempDir()
	}
	var wg sync.WaitGroup
	for i := range n {
		name := t.Name()
		if n > 1 {
			name += "-" + strconv.Itoa(i)
		}
		wg.Go(func() { clusters[i], errs[i] = New(ctx, name, dirs[i], opts) })
	}
	wg.Wait()
	for _, c := range clusters {
		if c == nil {
			continue
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("cluster %s:\n%s\ncomponent logs\n%s", c.Name, c.Describe(context.Background()), c.LogTails(logTailLines))
			}
			if err := c.Stop(); err != nil {
				t.Errorf("stop cluster %s: %v", c.Name, err)
			}
		})
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(fmt.Errorf("testenv: %w", err))
		}
	}
	return clusters
}
