package render

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

func benchUnit(b *testing.B, u slice.Unit, opts Options) {
	ctx := context.Background()
	if _, err := Unit(ctx, fixtureRepo, u, opts); err != nil { // warm the worker pool
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for b.Loop() {
		res, err := Unit(ctx, fixtureRepo, u, opts)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Objects) == 0 {
			b.Fatal("no objects")
		}
	}
	// CPU time of this process per render: on a shared machine wall time
	// (ns/op) mostly measures the neighbours. A Helm worker's CPU is not
	// included.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRenderKustomizeUnit: an overlay with a base and two patches.
func BenchmarkRenderKustomizeUnit(b *testing.B) {
	u := unitAt("nginx", slice.UnitKustomize, "rendered/ab/member1/nginx")
	benchUnit(b, u, Options{})
}

// BenchmarkRenderManifestsUnit: plain manifest files.
func BenchmarkRenderManifestsUnit(b *testing.B) {
	benchUnit(b, unitAt("collector", slice.UnitManifests, "rendered/ab/member1/plain"), Options{})
}

// BenchmarkRenderHelmUnit: chart templated in a worker process, then the
// unit's kustomization (images, replicas, namespace). Allocations of the
// worker process are not counted.
func BenchmarkRenderHelmUnit(b *testing.B) {
	benchUnit(b, helmUnit("frontend-web", "rendered/ab/member1/web", "charts/web/1.0.0", "web"), Options{})
}

// BenchmarkRenderHelmUnitInProcess: the same without process isolation.
func BenchmarkRenderHelmUnitInProcess(b *testing.B) {
	benchUnit(b, helmUnit("frontend-web", "rendered/ab/member1/web", "charts/web/1.0.0", "web"), Options{HelmInProcess: true})
}
