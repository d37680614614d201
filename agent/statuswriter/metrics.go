package statuswriter

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

// Push results, the values of flotilla_status_push_total's result label.
const (
	PushSuccess     = "success"     // committed and pushed
	PushUnreachable = "unreachable" // Git could not be reached; the document stays pending
	PushRejected    = "rejected"    // the server refused the push (permissions, hook)
	PushConflict    = "conflict"    // the ref kept moving under us
	PushAuth        = "auth"        // credentials refused
	// PushInstanceConflict: the ref holds another cluster instance's live
	// document (ErrInstanceConflict); nothing was pushed.
	PushInstanceConflict = "instance_conflict"
	PushError            = "error" // anything else
)

// writerMetrics are the writer's collectors; nil-safe so a Writer works
// without a registry.
type writerMetrics struct {
	total    *prometheus.CounterVec
	duration prometheus.Histogram
	pending  prometheus.Gauge
}

func newWriterMetrics(reg prometheus.Registerer) (*writerMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &writerMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_status_push_total",
			Help: "Status pushes to Git by result: success, unreachable, rejected, conflict, auth, instance_conflict, error.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "flotilla_status_push_duration_seconds",
			Help:    "Duration of one status push (commit, push, and retries of lost races).",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flotilla_status_pending",
			Help: "1 while a status document is waiting to be pushed (Git unreachable or refusing), else 0.",
		}),
	}
	var err error
	if m.total, err = register(reg, m.total); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.pending, err = register(reg, m.pending); err != nil {
		return nil, err
	}
	for _, r := range []string{PushSuccess, PushUnreachable, PushRejected, PushConflict, PushAuth, PushInstanceConflict, PushError} {
		m.total.WithLabelValues(r)
	}
	return m, nil
}

// register adds c to reg, or returns the collector already registered
// under the same name (several writers may share one registry).
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, err
}

func (m *writerMetrics) observe(seconds float64, result string) {
	if m == nil {
		return
	}
	m.total.WithLabelValues(result).Inc()
	m.duration.Observe(seconds)
}

func (m *writerMetrics) setPending(p bool) {
	if m == nil {
		return
	}
	v := 0.0
	if p {
		v = 1
	}
	m.pending.Set(v)
}

// pushResult classifies a push error for the metric.
func pushResult(err error) string {
	switch {
	case err == nil:
		return PushSuccess
	case errors.Is(err, gitrepo.ErrUnreachable):
		return PushUnreachable
	case errors.Is(err, gitrepo.ErrRejected):
		return PushRejected
	case errors.Is(err, gitrepo.ErrConflict):
		return PushConflict
	case errors.Is(err, gitrepo.ErrAuth):
		return PushAuth
	case errors.Is(err, ErrInstanceConflict):
		return PushInstanceConflict
	}
	return PushError
}
