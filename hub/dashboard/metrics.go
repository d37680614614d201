package dashboard

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flotilla-gitops/flotilla/hub/rollout"
)

// PathMetrics is where Server answers Prometheus scrapes when it has
// Metrics.
const PathMetrics = "/metrics"

// Metrics are the fleet's progressive rollouts as Prometheus gauges, set
// from every successful read, so dashboards and alerts (a rollout held
// longer than N minutes, one that advance could release but nobody does)
// need nothing but a scrape of flotilla dashboard:
//
//	flotilla_rollout_waves{application}                 waves of the rollout
//	flotilla_rollout_waves_released{application}        waves that have the revision
//	flotilla_rollout_state{application,state}           1 for the rollout's state (rollout.ProgressStates), 0 for the others
//	flotilla_rollout_clusters{application,wave,phase}   clusters of a wave per phase (Held, Pending, Applied, Ready, Failed)
//	flotilla_rollout_info{application,revision}         1, naming the revision rolled out
//	flotilla_dashboard_last_read_timestamp_seconds      when the fleet was last read successfully
type Metrics struct {
	reg                                  *prometheus.Registry
	waves, released, state, clusters, rv *prometheus.GaugeVec
	lastRead                             prometheus.Gauge
}

// NewMetrics registers the gauges on a registry of their own.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		waves: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flotilla_rollout_waves",
			Help: "Waves of the application's progressive rollout."}, []string{"application"}),
		released: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flotilla_rollout_waves_released",
			Help: "Waves of the application's rollout that have its revision."}, []string{"application"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flotilla_rollout_state",
			Help: "1 for the rollout's state: Releasable (advance releases the next wave now), Baking, Waiting (a cluster not Ready), Failed (more Failed clusters than maxFailures), Paused, Aborted or Complete; 0 for the others."},
			[]string{"application", "state"}),
		clusters: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flotilla_rollout_clusters",
			Help: "Clusters of a wave of the application's rollout, per phase (Held, Pending, Applied, Ready, Failed)."},
			[]string{"application", "wave", "phase"}),
		rv: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flotilla_rollout_info",
			Help: "1, naming the revision the application's rollout rolls out."}, []string{"application", "revision"}),
		lastRead: prometheus.NewGauge(prometheus.GaugeOpts{Name: "flotilla_dashboard_last_read_timestamp_seconds",
			Help: "When the dashboard last read the fleet successfully (Unix time); the rollout metrics are as of then."}),
	}
	m.reg.MustRegister(m.waves, m.released, m.state, m.clusters, m.rv, m.lastRead)
	return m
}

// Registry is where the gauges are registered.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

var phases = []rollout.Phase{rollout.PhaseHeld, rollout.PhasePending, rollout.PhaseApplied, rollout.PhaseReady, rollout.PhaseFailed}

// Set replaces the gauges with the rollouts of one read, at.
func (m *Metrics) Set(progress []*rollout.Progress, at time.Time) {
	// A rollout that went away (its application removed) must not
	// linger at its last state.
	for _, v := range []*prometheus.GaugeVec{m.waves, m.released, m.state, m.clusters, m.rv} {
		v.Reset()
	}
	for _, p := range progress {
		app := p.Application
		m.waves.WithLabelValues(app).Set(float64(len(p.Waves)))
		m.released.WithLabelValues(app).Set(float64(min(p.Released, len(p.Waves))))
		m.rv.WithLabelValues(app, p.Revision).Set(1)
		for _, s := range rollout.ProgressStates {
			m.state.WithLabelValues(app, string(s)).Set(boolFloat(p.State == s))
		}
		for i, w := range p.Waves {
			name := w.Name
			if name == "" {
				name = "wave-" + strconv.Itoa(i+1)
			}
			count := map[rollout.Phase]int{}
			for _, c := range w.Clusters {
				count[c.Phase]++
			}
			for _, ph := range phases {
				m.clusters.WithLabelValues(app, name, string(ph)).Set(float64(count[ph]))
			}
		}
	}
	m.lastRead.Set(float64(at.Unix()))
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
