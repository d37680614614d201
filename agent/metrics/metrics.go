package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Cycle results, the values of flotilla_reconcile_total's result label.
const (
	// ResultSuccess: every unit is Ready at the desired revision.
	ResultSuccess = "success"
	// ResultPartial: the cycle ran, but some units failed or are not Ready.
	ResultPartial = "partial"
	// ResultFailure: the cycle could not run on a revision (no checkout,
	// refused commit, unreadable slice) or was cancelled.
	ResultFailure = "failure"
)

// Fetch results, the values of flotilla_git_fetch_duration_seconds' result label.
const (
	FetchSuccess     = "success"
	FetchUnreachable = "unreachable"
	FetchError       = "error"
)

// RequestCounts reports API requests made so far (apply.WriteCounter has
// this shape).
type RequestCounts interface {
	Writes() int64
	DryRuns() int64
	Reads() int64
}

// Metrics holds the agent's collectors.
type Metrics struct {
	registry *prometheus.Registry

	reconcileDuration prometheus.Histogram
	reconcileTotal    *prometheus.CounterVec
	fetchDuration     *prometheus.HistogramVec
	appliedRevision   *prometheus.GaugeVec
	unitReady         *prometheus.GaugeVec
	driftCorrections  prometheus.Counter
	managedObjects    prometheus.Gauge
	leader            prometheus.Gauge
	restarts          *prometheus.CounterVec
	lastExitCause     *prometheus.GaugeVec
	pruneHeld         prometheus.Gauge

	mu          sync.Mutex
	revision    string
	readyLabels map[string]bool
}

// New registers every collector in a new registry.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		reconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "flotilla_reconcile_duration_seconds",
			Help:    "Duration of one reconcile cycle: fetch, verify, render, apply, prune and health of every unit.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}),
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_reconcile_total",
			Help: "Reconcile cycles by result: success (all units Ready), partial (some units failed or not Ready), failure (no revision could be reconciled).",
		}, []string{"result"}),
		fetchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_git_fetch_duration_seconds",
			Help:    "Duration of a Git sync (ls-remote, and a fetch when the head moved), by result.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"result"}),
		appliedRevision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_applied_revision_info",
			Help: "The revision every unit was last applied at (value 1).",
		}, []string{"revision"}),
		unitReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_unit_ready",
			Help: "1 when the unit is Ready, 0 otherwise.",
		}, []string{"unit"}),
		driftCorrections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_drift_corrections_total",
			Help: "Objects re-applied because their live state drifted from the last apply.",
		}),
		managedObjects: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flotilla_managed_objects",
			Help: "Objects owned by the unit inventories.",
		}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_agent_restarts_total",
			Help: "Exits of this agent before its current start, by cause (lease-lost, signal, error, unknown), as recorded in --cache-dir: it survives container restarts.",
		}, []string{"cause"}),
		lastExitCause: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_agent_last_exit_cause",
			Help: "1 for the cause of this agent's last exit before its current start; absent on a first start.",
		}, []string{"cause"}),
		pruneHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flotilla_prune_held",
			Help: "1 while the cluster's PruneHeld condition is true: units left the slice but too many to prune without the deliberate command.",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flotilla_leader",
			Help: "1 while this replica holds the leader lease (or runs without leader election).",
		}),
		readyLabels: map[string]bool{},
	}
	m.registry.MustRegister(
		m.reconcileDuration, m.reconcileTotal, m.fetchDuration, m.appliedRevision,
		m.unitReady, m.driftCorrections, m.managedObjects, m.leader, m.restarts, m.lastExitCause, m.pruneHeld,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, r := range []string{ResultSuccess, ResultPartial, ResultFailure} {
		m.reconcileTotal.WithLabelValues(r)
	}
	return m
}

// Registry is the registry holding every collector.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// CountAPIRequests exports c as flotilla_kube_api_requests_total{type}.
func (m *Metrics) CountAPIRequests(c RequestCounts) {
	if m == nil || c == nil {
		return
	}
	for typ, f := range map[string]func() int64{"write": c.Writes, "dry_run": c.DryRuns, "read": c.Reads} {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "flotilla_kube_api_requests_total",
			Help:        "Kubernetes API requests made by the agent: write (mutating), dry_run, read (GET, LIST, WATCH).",
			ConstLabels: prometheus.Labels{"type": typ},
		}, func() float64 { return float64(f()) }))
	}
}

// CountVerificationFailures registers
// flotilla_verification_failures_total{reason} with a series at 0 for each
// of reasons, and returns the function counting one refusal.
func (m *Metrics) CountVerificationFailures(reasons []string) (func(reason string), error) {
	if m == nil {
		return func(string) {}, nil
	}
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_verification_failures_total",
		Help: "Fetched commits refused by signature verification, by reason.",
	}, []string{"reason"})
	for _, r := range reasons {
		c.WithLabelValues(r)
	}
	if err := m.registry.Register(c); err != nil {
		return nil, err
	}
	return func(reason string) { c.WithLabelValues(reason).Inc() }, nil
}

// ObserveCycle records one cycle's duration and result.
func (m *Metrics) ObserveCycle(d time.Duration, result string) {
	if m == nil {
		return
	}
	m.reconcileDuration.Observe(d.Seconds())
	m.reconcileTotal.WithLabelValues(result).Inc()
}

// ObserveFetch records one Git sync.
func (m *Metrics) ObserveFetch(d time.Duration, result string) {
	if m == nil {
		return
	}
	m.fetchDuration.WithLabelValues(result).Observe(d.Seconds())
}

// SetAppliedRevision makes revision the only flotilla_applied_revision_info series.
func (m *Metrics) SetAppliedRevision(revision string) {
	if m == nil || revision == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if revision == m.revision {
		return
	}
	m.appliedRevision.Reset()
	m.appliedRevision.WithLabelValues(revision).Set(1)
	m.revision = revision
}

// SetUnits sets flotilla_unit_ready for every unit in ready and drops the
// series of units no longer listed.
func (m *Metrics) SetUnits(ready map[string]bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for unit := range m.readyLabels {
		if _, ok := ready[unit]; !ok {
			m.unitReady.DeleteLabelValues(unit)
			delete(m.readyLabels, unit)
		}
	}
	for unit, ok := range ready {
		m.unitReady.WithLabelValues(unit).Set(gaugeBool(ok))
		m.readyLabels[unit] = true
	}
}

// AddDriftCorrections counts objects re-applied because they drifted.
func (m *Metrics) AddDriftCorrections(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.driftCorrections.Add(float64(n))
}

// SetManagedObjects sets the number of objects the inventories own.
func (m *Metrics) SetManagedObjects(n int) {
	if m == nil {
		return
	}
	m.managedObjects.Set(float64(n))
}

// SetPruneHeld records whether the cluster's prune is held.
func (m *Metrics) SetPruneHeld(held bool) {
	if m == nil {
		return
	}
	m.pruneHeld.Set(gaugeBool(held))
}

// SetLeader records whether this replica leads.
func (m *Metrics) SetLeader(leading bool) {
	if m == nil {
		return
	}
	m.leader.Set(gaugeBool(leading))
}

// gaugeBool is a boolean gauge's value: 1 for true.
func gaugeBool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// SetRestarts publishes the exits recorded before this start (counts by
// cause) and the last one's cause ("" when none).
func (m *Metrics) SetRestarts(counts map[string]int, lastCause string) {
	if m == nil {
		return
	}
	for cause, n := range counts {
		m.restarts.WithLabelValues(cause).Add(float64(n))
	}
	if lastCause != "" {
		m.lastExitCause.WithLabelValues(lastCause).Set(1)
	}
}
