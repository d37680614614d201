package metrics_test

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flotilla-gitops/flotilla/agent/metrics"
)

type counts struct{ w, d, r int64 }

func (c counts) Writes() int64  { return c.w }
func (c counts) DryRuns() int64 { return c.d }
func (c counts) Reads() int64   { return c.r }

// series gathers the registry as "name{label=value,…}" → value (counters,
// gauges; histograms as their sample count).
func series(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := f.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = s.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = s.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key] = float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func TestMetricsSeries(t *testing.T) {
	m := metrics.New()
	m.CountAPIRequests(counts{w: 3, d: 2, r: 7})
	m.ObserveFetch(20*time.Millisecond, metrics.FetchSuccess)
	m.ObserveFetch(time.Second, metrics.FetchUnreachable)
	m.ObserveCycle(2*time.Second, metrics.ResultSuccess)
	m.ObserveCycle(3*time.Second, metrics.ResultPartial)
	m.SetAppliedRevision("main@sha1:aaa")
	m.SetAppliedRevision("main@sha1:bbb")
	m.SetUnits(map[string]bool{"web": true, "db": false, "gone": true})
	m.SetUnits(map[string]bool{"web": true, "db": false})
	m.AddDriftCorrections(2)
	m.AddDriftCorrections(0)
	m.SetManagedObjects(42)
	m.SetLeader(true)
	m.SetPruneHeld(true)

	got := series(t, m)
	want := map[string]float64{
		"flotilla_reconcile_duration_seconds":                     2,
		"flotilla_reconcile_total{result=success}":                1,
		"flotilla_reconcile_total{result=partial}":                1,
		"flotilla_reconcile_total{result=failure}":                0,
		"flotilla_git_fetch_duration_seconds{result=success}":     1,
		"flotilla_git_fetch_duration_seconds{result=unreachable}": 1,
		"flotilla_applied_revision_info{revision=main@sha1:bbb}":  1,
		"flotilla_unit_ready{unit=web}":                           1,
		"flotilla_unit_ready{unit=db}":                            0,
		"flotilla_drift_corrections_total":                        2,
		"flotilla_managed_objects":                                42,
		"flotilla_leader":                                         1,
		"flotilla_prune_held":                                     1,
		"flotilla_kube_api_requests_total{type=write}":            3,
		"flotilla_kube_api_requests_total{type=dry_run}":          2,
		"flotilla_kube_api_requests_total{type=read}":             7,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for _, k := range []string{"flotilla_applied_revision_info{revision=main@sha1:aaa}", "flotilla_unit_ready{unit=gone}"} {
		if _, ok := got[k]; ok {
			t.Errorf("stale series %s still exported", k)
		}
	}
	// Every series of the agent's own is prefixed flotilla_; the rest are
	// the standard Go and process collectors.
	for k := range got {
		if !strings.HasPrefix(k, "flotilla_") && !strings.HasPrefix(k, "go_") && !strings.HasPrefix(k, "process_") {
			t.Errorf("series %s has no flotilla_ prefix", k)
		}
	}
}

func TestNilMetricsIsANoOp(t *testing.T) {
	var m *metrics.Metrics
	m.ObserveCycle(time.Second, metrics.ResultFailure)
	m.ObserveFetch(time.Second, metrics.FetchError)
	m.SetAppliedRevision("main@sha1:x")
	m.SetUnits(map[string]bool{"a": true})
	m.AddDriftCorrections(1)
	m.SetManagedObjects(1)
	m.SetLeader(true)
	m.SetPruneHeld(true)
	m.CountAPIRequests(counts{})
	if _, err := m.CountVerificationFailures([]string{"unsigned"}); err != nil {
		t.Error(err)
	}
}
