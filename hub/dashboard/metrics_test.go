package dashboard

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// metricsProgress evaluates web's rollout as rollout status would: the
// canary a1 released and Failed, b2 and c3 held.
func metricsProgress(paused bool) []*rollout.Progress {
	st := &rollout.State{Application: "web", Revision: "sha256:0b748dcab05e", Released: 1, Waves: 2, Paused: paused}
	waves := []fleet.ResolvedWave{{Name: "canary", Clusters: []string{"a1"}}, {Name: "rest", Clusters: []string{"b2", "c3"}}}
	doc := &status.ClusterStatus{Cluster: "a1", Units: []status.UnitStatus{{Name: "web", Hash: "sha256:new", LastError: "admission denied"}}}
	observe := func(c string) rollout.ClusterProgress { return rollout.Observe(c, "web", "sha256:new", doc, "") }
	return []*rollout.Progress{rollout.Evaluate(st, waves, time.Minute, observe, time.Now())}
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathMetrics, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", PathMetrics, rec.Code, body)
	}
	return string(body)
}

// TestRolloutMetrics: /metrics carries each rollout's waves, state (one
// of them 1) and clusters per phase from the last good read; a rollout
// that is gone leaves no series behind.
func TestRolloutMetrics(t *testing.T) {
	var progress []*rollout.Progress
	srv := &Server{Refresh: time.Minute, Metrics: NewMetrics(), Load: func(context.Context) (*Model, error) {
		return NewModel(snapshot(), progress, LinkerFor("", "")), nil
	}}
	for _, tc := range []struct {
		name     string
		progress []*rollout.Progress
		want     []string
		absent   []string
	}{
		{"a Failed canary", metricsProgress(false), []string{
			`flotilla_rollout_waves{application="web"} 2`,
			`flotilla_rollout_waves_released{application="web"} 1`,
			`flotilla_rollout_state{application="web",state="Failed"} 1`,
			`flotilla_rollout_state{application="web",state="Releasable"} 0`,
			`flotilla_rollout_clusters{application="web",phase="Failed",wave="canary"} 1`,
			`flotilla_rollout_clusters{application="web",phase="Held",wave="rest"} 2`,
			`flotilla_rollout_info{application="web",revision="sha256:0b748dcab05e"} 1`,
			`flotilla_dashboard_last_read_timestamp_seconds `,
		}, nil},
		{"paused", metricsProgress(true), []string{
			`flotilla_rollout_state{application="web",state="Paused"} 1`,
			`flotilla_rollout_state{application="web",state="Failed"} 0`,
		}, nil},
		{"gone", nil, []string{`flotilla_dashboard_last_read_timestamp_seconds `}, []string{`flotilla_rollout_state{`, `flotilla_rollout_waves{`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			progress = tc.progress
			if err := srv.Update(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := scrape(t, srv)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("no %q in\n%s", w, got)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(got, a) {
					t.Errorf("%q left behind in\n%s", a, got)
				}
			}
		})
	}
	// Without Metrics the path is not served.
	rec := httptest.NewRecorder()
	(&Server{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathMetrics, nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET %s without metrics: %d", PathMetrics, rec.Code)
	}
}
