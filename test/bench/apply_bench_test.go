package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/normalize"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// The Flux benchmark shape: each unit is a Deployment with 0 replicas, a
// ServiceAccount, a Service and an Ingress.
const (
	applyBenchUnits      = 1000
	applyBenchNamespaces = 10
	// applyBenchWorkers units are applied at a time, as the agent does for
	// independent units; the API server is local, so client QPS is no limit.
	applyBenchWorkers = 16
)

// benchWorkers may be overridden with FLOTILLA_BENCH_APPLY_WORKERS to
// explore the parallelism.
func benchWorkers() int {
	if n, err := strconv.Atoi(os.Getenv("FLOTILLA_BENCH_APPLY_WORKERS")); err == nil && n > 0 {
		return n
	}
	return applyBenchWorkers
}

// BenchmarkApplyFluxShape applies 1,000 units × 4 objects cold into a
// minimal cluster through apply.Applier, then again with nothing changed
// (per-object metadata reads, then one List per kind via Observe), then
// with one unit changed; for comparison it also checks the unchanged set
// the way Flux does (ssa.ResourceManager.ApplyAll: a GET and a server-side
// dry-run per object). It reports wall time, API requests and this
// process's heap and RSS per phase.
func BenchmarkApplyFluxShape(b *testing.B) {
	ctrllog.SetLogger(logr.Discard())
	c := testenv.StartCluster(b, testenv.ClusterOptions{Mode: testenv.Minimal})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const invNS = "flotilla-system"
	if err := c.CreateNamespace(ctx, invNS); err != nil {
		b.Fatal(err)
	}
	counter := &apply.WriteCounter{}
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	counter.Wrap(cfg)
	newApplier := func() *apply.Applier {
		a, err := apply.New(cfg, apply.Options{InventoryNamespace: invNS, Cluster: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	a := newApplier()
	// The agent lists inventories at start-up (to find units to delete).
	if _, err := a.Units(ctx); err != nil {
		b.Fatal(err)
	}
	report := &benchReport{b: b}

	// Namespaces first, as the slice's flotilla-namespaces unit.
	var nsObjs []*unstructured.Unstructured
	for i := range applyBenchNamespaces {
		nsObjs = append(nsObjs, benchObj("v1", "Namespace", "", benchNamespace(i), nil))
	}
	nsUnit := apply.UnitRequest{Name: "flotilla-namespaces", Hash: "ns-1", Objects: nsObjs, Prune: true}

	b.ResetTimer()
	phase := report.start("cold", counter)
	if _, err := a.Apply(ctx, nsUnit); err != nil {
		b.Fatal(err)
	}
	results := applyAll(ctx, b, a, nil, func(i int) string { return "1" })
	phase.end(results)

	// Nothing changed, same Applier: a metadata read per object.
	phase = report.start("unchanged", counter)
	results = applyAll(ctx, b, a, nil, func(i int) string { return "1" })
	phase.end(results)

	// Nothing changed, restarted agent, one List per kind.
	a = newApplier()
	phase = report.start("unchanged-observed-restart", counter)
	obs, err := a.Observe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	results = applyAll(ctx, b, a, obs, func(i int) string { return "1" })
	phase.end(results)
	if obs.Len() < applyBenchUnits*4 {
		b.Fatalf("observation holds %d objects", obs.Len())
	}

	// One unit changed (new image), the rest unchanged, observed.
	phase = report.start("one-changed-observed", counter)
	obs, err = a.Observe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	results = applyAll(ctx, b, a, obs, func(i int) string {
		if i == 500 {
			return "2"
		}
		return "1"
	})
	phase.end(results)

	// Flux's drift check on the same unchanged objects, for comparison.
	phase = report.start("unchanged-ssa-dryrun", counter)
	fluxStyleCheck(ctx, b, cfg)
	phase.end(nil)
	b.StopTimer()
	report.print()
}

// applyAll applies every bench unit with applyBenchWorkers in parallel,
// rendering each unit's objects when its turn comes (as the agent does).
func applyAll(ctx context.Context, b *testing.B, a *apply.Applier, obs *apply.Observation, version func(int) string) []*apply.UnitResult {
	results := make([]*apply.UnitResult, applyBenchUnits)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range benchWorkers() {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= applyBenchUnits {
					return
				}
				v := version(i)
				res, err := a.Apply(ctx, apply.UnitRequest{
					Name: benchUnit(i), Revision: "main@sha1:" + v, Hash: "sha256:" + v,
					Objects: benchUnitObjects(i, v), Prune: true, Observed: obs,
				})
				results[i] = res
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		b.Fatalf("%d units failed, first: %v", len(errs), errs[0])
	}
	return results
}

// fluxStyleCheck runs ssa.ResourceManager.ApplyAll over every unit's
// (already applied, unchanged) objects: Flux's per-reconcile drift check.
func fluxStyleCheck(ctx context.Context, b *testing.B, cfg *rest.Config) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		b.Fatal(err)
	}
	k, err := client.New(cfg, client.Options{HTTPClient: hc, Mapper: mapper})
	if err != nil {
		b.Fatal(err)
	}
	rm := ssa.NewResourceManager(k, polling.NewStatusPoller(k, mapper, polling.Options{}), ssa.Owner{Field: apply.DefaultFieldManager, Group: "flotilla.dev"})
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		changed atomic.Int64
		failed  atomic.Value
	)
	for range benchWorkers() {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= applyBenchUnits {
					return
				}
				v := "1"
				if i == 500 {
					v = "2"
				}
				objs := benchUnitObjects(i, v)
				for _, o := range objs {
					l := o.GetLabels()
					if l == nil {
						l = map[string]string{}
					}
					l[apply.LabelManagedBy], l[apply.LabelUnit] = apply.ManagedByValue, benchUnit(i)
					o.SetLabels(l)
				}
				if err := normalize.UnstructuredList(objs); err != nil {
					failed.Store(err)
					return
				}
				cs, err := rm.ApplyAll(ctx, objs, ssa.DefaultApplyOptions())
				if err != nil {
					failed.Store(err)
					return
				}
				for _, e := range cs.Entries {
					if e.Action != ssa.UnchangedAction {
						changed.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	if n := changed.Load(); n != 0 {
		b.Logf("ssa found %d objects to change (expected 0)", n)
	}
}

func benchUnit(i int) string      { return fmt.Sprintf("app-%04d", i) }
func benchNamespace(i int) string { return fmt.Sprintf("bench-%d", i%applyBenchNamespaces) }

func benchObj(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

func benchUnitObjects(i int, version string) []*unstructured.Unstructured {
	name, ns := benchUnit(i), benchNamespace(i)
	labels := map[string]any{"app": name}
	return []*unstructured.Unstructured{
		benchObj("v1", "ServiceAccount", ns, name, nil),
		benchObj("v1", "Service", ns, name, map[string]any{"spec": map[string]any{
			"selector": labels,
			"ports":    []any{map[string]any{"name": "http", "port": int64(9898), "targetPort": "http", "protocol": "TCP"}},
		}}),
		benchObj("apps/v1", "Deployment", ns, name, map[string]any{"spec": map[string]any{
			"replicas": int64(0),
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"serviceAccountName": name,
					"containers": []any{map[string]any{
						"name":  "podinfo",
						"image": "ghcr.io/stefanprodan/podinfo:6.7." + version,
						"ports": []any{map[string]any{"name": "http", "containerPort": int64(9898), "protocol": "TCP"}},
						"resources": map[string]any{
							"requests": map[string]any{"cpu": "10m", "memory": "16Mi"},
							"limits":   map[string]any{"memory": "64Mi"},
						},
					}},
				},
			},
		}}),
		benchObj("networking.k8s.io/v1", "Ingress", ns, name, map[string]any{"spec": map[string]any{
			"rules": []any{map[string]any{
				"host": name + ".example.com",
				"http": map[string]any{"paths": []any{map[string]any{
					"path": "/", "pathType": "Prefix",
					"backend": map[string]any{"service": map[string]any{"name": name, "port": map[string]any{"name": "http"}}},
				}}},
			}},
		}}),
	}
}

// benchReport collects one line per phase.
type benchReport struct {
	b     *testing.B
	lines []string
}

type benchPhase struct {
	r                      *benchReport
	name                   string
	counter                *apply.WriteCounter
	began                  time.Time
	writes, reads, dryRuns int64
	cpu, clusterCPU        time.Duration
}

func (r *benchReport) start(name string, counter *apply.WriteCounter) *benchPhase {
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	return &benchPhase{r: r, name: name, counter: counter, began: time.Now(),
		writes: counter.Writes(), reads: counter.Reads(), dryRuns: counter.DryRuns(), cpu: processCPU(), clusterCPU: childrenCPU()}
}

func (p *benchPhase) end(results []*apply.UnitResult) {
	wall := time.Since(p.began)
	cpu := processCPU() - p.cpu
	clusterCPU := childrenCPU() - p.clusterCPU
	writes := p.counter.Writes() - p.writes
	reads := p.counter.Reads() - p.reads
	dryRuns := p.counter.DryRuns() - p.dryRuns
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	peak := procStatusKiB("VmHWM")
	var created, configured, unchanged, skipped int
	for _, r := range results {
		created += r.Created
		configured += r.Configured
		unchanged += r.Unchanged
		if r.Skipped {
			skipped++
		}
	}
	runtime.GC()
	debug.FreeOSMemory()
	rssAfter := procStatusKiB("VmRSS")
	line := fmt.Sprintf("%-28s wall %7.2fs  cpu %6.2fs  apiserver+etcd cpu %6.2fs  writes %5d  dry-runs %5d  reads %5d  created %4d configured %4d unchanged %4d skipped-units %4d  heap-in-use %4d MiB  peak-RSS %4d MiB  RSS-after-GC %4d MiB",
		p.name, wall.Seconds(), cpu.Seconds(), clusterCPU.Seconds(), writes, dryRuns, reads, created, configured, unchanged, skipped, ms.HeapInuse>>20, peak>>10, rssAfter>>10)
	p.r.lines = append(p.r.lines, line)
	p.r.b.Log(line)
	metric := strings.ReplaceAll(p.name, "-", "_")
	p.r.b.ReportMetric(wall.Seconds(), metric+"_s")
	p.r.b.ReportMetric(float64(writes), metric+"_writes")
	p.r.b.ReportMetric((cpu + clusterCPU).Seconds(), metric+"_totalCPU_s")
	p.r.b.ReportMetric(float64(peak>>10), metric+"_peakRSS_MiB")
}

func (r *benchReport) print() {
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("apply benchmark: %d units × 4 objects, %d workers, GOMAXPROCS %d, load %s", applyBenchUnits, benchWorkers(), runtime.GOMAXPROCS(0), load)
	for _, l := range r.lines {
		fmt.Println("  " + l)
	}
}

// processCPU is this process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childrenCPU sums the user+system CPU time of this process's live child
// processes (the cluster's etcd and kube-apiserver), from /proc.
func childrenCPU() time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := strconv.Itoa(os.Getpid())
	var ticks int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid ... utime(14) stime(15).
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat)[i+1:])
		if len(f) < 13 || f[1] != self {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / clockTicks
}

// resetPeakRSS restarts VmHWM so each phase reports its own peak (Linux).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// procStatusKiB reads a "kB" field of /proc/self/status; 0 if unavailable.
func procStatusKiB(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
