package render

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

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

// BenchmarkSchemaReset is what the first build that uses kustomize's
// built-in schema pays after a unit that set its own (schemaGate): the
// built-in schema parsed again.
func BenchmarkSchemaReset(b *testing.B) {
	b.ReportAllocs()
	deployment := kyaml.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	for b.Loop() {
		openapi.ResetOpenAPI()
		if openapi.SchemaForResourceType(deployment) == nil {
			b.Fatal("no Deployment in the built-in schema")
		}
	}
}

// BenchmarkAgentCycleRenders renders what an agent's cycle renders: 20
// units, GOMAXPROCS at a time; in custom-schema=1, one of them sets its
// own OpenAPI schema and renders alone, and the next unit parses the
// built-in schema again. Per op: the 20 renders.
func BenchmarkAgentCycleRenders(b *testing.B) {
	lists := unitAt("lists", slice.UnitKustomize, "units/lists")
	schema := unitAt("schema", slice.UnitKustomize, "units/schema")
	for _, custom := range []int{0, 1} {
		b.Run(fmt.Sprintf("custom-schema=%d", custom), func(b *testing.B) {
			units := make([]slice.Unit, 20)
			for i := range units {
				units[i] = lists
			}
			for i := range custom {
				units[i*len(units)/custom] = schema
			}
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				next := make(chan slice.Unit)
				var wg sync.WaitGroup
				for range runtime.GOMAXPROCS(0) {
					wg.Go(func() {
						for u := range next {
							if _, err := Unit(context.Background(), isolationRepo, u, Options{}); err != nil {
								b.Error(err)
							}
						}
					})
				}
				for _, u := range units {
					next <- u
				}
				close(next)
				wg.Wait()
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
