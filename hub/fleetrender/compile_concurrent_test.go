package fleetrender_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
)

// TestCompileManyClustersDeterministic: clusters are finished on a worker
// pool; the output must not depend on how many workers there are or how
// they are scheduled, and progress counts every cluster once, in order.
// Run with -race, it also checks that finishing shares no mutable state.
func TestCompileManyClustersDeterministic(t *testing.T) {
	root := copyTree(t, templateDir)
	// Clones of the template's clusters join its selector fleets (edge,
	// production, staging), so units shared between clusters, per-cluster
	// variables and generated units all occur many times over.
	const clones = 40
	for i := 0; i < clones; i++ {
		from := []string{"edge-1", "member2"}[i%2]
		data, err := os.ReadFile(filepath.Join(root, "clusters", from+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s-clone-%02d", from, i)
		clone := strings.Replace(string(data), "name: "+from, "name: "+name, 1)
		if err := os.WriteFile(filepath.Join(root, "clusters", name+".yaml"), []byte(clone), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	compile := func(procs int) (*fleetrender.Output, []int) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		var mu sync.Mutex
		var progress []int
		out := compileRepo(t, root, fleetrender.Options{Progress: func(done, total int) {
			mu.Lock()
			defer mu.Unlock()
			if total != 3+clones {
				t.Errorf("progress total = %d, want %d", total, 3+clones)
			}
			progress = append(progress, done)
		}})
		return out, progress
	}
	one, progress := compile(1)
	if len(one.Clusters) != 3+clones {
		t.Fatalf("compiled %d clusters, want %d", len(one.Clusters), 3+clones)
	}
	for i, done := range progress {
		if done != i+1 {
			t.Fatalf("progress = %v, want 1..%d in order", progress, 3+clones)
		}
	}
	if len(progress) != 3+clones {
		t.Fatalf("progress called %d times, want %d", len(progress), 3+clones)
	}
	for i := 1; i < len(one.Clusters); i++ {
		if one.Clusters[i-1].Slice.Cluster >= one.Clusters[i].Slice.Cluster {
			t.Fatalf("clusters out of order: %s before %s", one.Clusters[i-1].Slice.Cluster, one.Clusters[i].Slice.Cluster)
		}
	}
	for run := 0; run < 3; run++ {
		many, _ := compile(8)
		if !reflect.DeepEqual(one, many) {
			t.Fatalf("run %d: the output with 8 workers differs from the output with 1", run)
		}
	}
}
