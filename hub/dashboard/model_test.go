package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.html")

const (
	head = "0123456789abcdef0123456789abcdef01234567"
	old  = "fedcba9876543210fedcba9876543210fedcba98"
)

// Secret-looking text an agent (or whoever holds its credentials) might
// have committed unredacted.
const (
	secretPassword = "hunter2-correct-horse"
	secretBlob     = "c3VwZXJzZWNyZXRfdG9rZW5fdmFsdWVfMTIzNDU2Nzg5MA=="
	secretPEM      = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
)

var leaky = "apply failed: Secret creds: password=" + secretPassword + "; data: {token: " + secretBlob + "}\n-----BEGIN PRIVATE KEY-----\n" + secretPEM + "\n-----END PRIVATE KEY-----"

func cond(typ string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg}
}

// snapshot is a small fleet: alpha in sync with a completed job, beta
// failing with a leaky error, gamma unreachable.
func snapshot() *fleetview.Snapshot {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	hb := metav1.NewTime(now.Add(-20 * time.Second))
	stale := metav1.NewTime(now.Add(-time.Hour))
	rev := "main@sha1:" + head
	started, done := metav1.NewTime(now.Add(-5*time.Minute)), metav1.NewTime(now.Add(-4*time.Minute))
	ready := []metav1.Condition{cond(status.ConditionReady, metav1.ConditionTrue, "Applied", "")}
	v := &fleetview.View{
		Repo: "https://github.com/example/fleet.git", Branch: "main", Revision: head, Time: metav1.NewTime(now),
		Summary:  map[fleetview.State]int{fleetview.StateInSync: 1, fleetview.StateFailing: 1, fleetview.StateUnreachable: 1},
		Warnings: []string{"token=" + secretPassword},
		Clusters: []fleetview.ClusterView{
			{Name: "alpha", Fleets: []string{"gpu", "prod"}, State: fleetview.StateInSync, AppliedRevision: rev, DesiredRevision: rev,
				UnitsReady: 1, UnitsTotal: 1, Heartbeat: &hb, HeartbeatAge: &metav1.Duration{Duration: 20 * time.Second},
				Jobs: fleetview.JobCounts{Total: 1, ByPhase: map[string]int{"Completed": 1}}, UnreachableAfter: metav1.Duration{Duration: 30 * time.Minute}},
			{Name: "beta", Fleets: []string{"prod"}, State: fleetview.StateFailing, Reason: "settings: ApplyFailed", DesiredRevision: rev,
				UnitsTotal: 1, Heartbeat: &hb, HeartbeatAge: &metav1.Duration{Duration: 20 * time.Second}, UnreachableAfter: metav1.Duration{Duration: 30 * time.Minute},
				FailingUnits: []fleetview.UnitFailure{{Unit: "settings", Reason: "ApplyFailed", Message: leaky}}},
			{Name: "gamma", Fleets: []string{"edge"}, State: fleetview.StateUnreachable, Reason: "no heartbeat for 1h0m0s (threshold 30m0s)",
				AppliedRevision: "main@sha1:" + old, Heartbeat: &stale, HeartbeatAge: &metav1.Duration{Duration: time.Hour}, UnreachableAfter: metav1.Duration{Duration: 30 * time.Minute}},
		},
	}
	docs := &fleetview.Documents{Repo: v.Repo, Branch: "main", Revision: head, Clusters: []fleetview.ClusterDocument{
		{Cluster: "alpha", Document: &status.ClusterStatus{Cluster: "alpha", Heartbeat: hb,
			Units: []status.UnitStatus{{Name: "settings", AppliedRevision: rev, Objects: 2, DriftCorrections: 3, Conditions: ready}},
			Jobs: []status.JobStatus{{Name: "train", Namespace: "ml", Unit: "job-train", Phase: "Completed", PodGroupPhase: "Completed",
				Succeeded: 3, Preflight: "Fits", StartTime: &started, CompletionTime: &done}}}},
		{Cluster: "beta", Document: &status.ClusterStatus{Cluster: "beta", Heartbeat: hb, LastError: "fetch: https://agent:" + secretPassword + "@git.example.com/fleet.git: timeout",
			Units: []status.UnitStatus{{Name: "settings", AppliedRevision: "main@sha1:" + old, Objects: 2, LastError: leaky,
				Conditions: []metav1.Condition{cond(status.ConditionReady, metav1.ConditionFalse, status.ReasonApplyFailed, leaky)}}}}},
		{Cluster: "gamma", Document: &status.ClusterStatus{Cluster: "gamma", Heartbeat: stale,
			Units: []status.UnitStatus{{Name: "settings", AppliedRevision: "main@sha1:" + old, Conditions: ready}}}},
	}}
	r := &fleetview.RolloutView{Commit: head, Subject: "Green settings", Author: "Maintainer <m@example.com>", State: fleetview.RolloutFailed,
		Summary: map[fleetview.RolloutState]int{fleetview.RolloutCompleted: 1, fleetview.RolloutFailed: 1, fleetview.RolloutUnaffected: 1},
		Clusters: []fleetview.ClusterRollout{
			{Name: "alpha", State: fleetview.RolloutCompleted, Reason: "applied"},
			{Name: "beta", State: fleetview.RolloutFailed, Reason: "ApplyFailed: " + leaky},
			{Name: "gamma", State: fleetview.RolloutUnaffected},
		}}
	return &fleetview.Snapshot{View: v, Documents: docs, Rollout: r, Labels: map[string]map[string]string{
		"alpha": {"env": "prod", "gpu": "true"}, "beta": {"env": "prod"}, "gamma": {"env": "edge"}}}
}

func waves() []*rollout.Progress {
	return []*rollout.Progress{{Application: "settings", Revision: "v2", Released: 1, Waves: []rollout.WaveProgress{
		{Name: "canary", Released: true, Clusters: []rollout.ClusterProgress{{Cluster: "alpha", Phase: "Completed"}}},
		{Name: "rest", Clusters: []rollout.ClusterProgress{{Cluster: "beta", Phase: "Held", Reason: "password=" + secretPassword}}},
	}}}
}

func render(t *testing.T, m *Model, o PageOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := WritePage(&b, m, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestModel(t *testing.T) {
	m := NewModel(snapshot(), waves(), LinkerFor("https://github.com/example/fleet.git", ""))
	if got := m.Head.URL; got != "https://github.com/example/fleet/commit/"+head {
		t.Errorf("head link %q", got)
	}
	byName := map[string]Cluster{}
	for _, c := range m.Clusters {
		byName[c.Name] = c
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"alpha state", byName["alpha"].State, "InSync"},
		{"beta state", byName["beta"].State, "Failing"},
		{"gamma state", byName["gamma"].State, "Unreachable"},
		{"alpha labels", strings.Join(byName["alpha"].Labels, ","), "env=prod,gpu=true"},
		{"alpha drift", byName["alpha"].Units[0].DriftCorrections, int64(3)},
		{"alpha unit health", byName["alpha"].Units[0].Health, "Ready"},
		{"beta unit health", byName["beta"].Units[0].Health, "Failing"},
		{"beta unit reason", byName["beta"].Units[0].HealthReason, status.ReasonApplyFailed},
		{"gamma heartbeat age", byName["gamma"].HeartbeatAge, "60m"},
		{"alpha jobs", byName["alpha"].Jobs, "1 Completed"},
		{"job", m.Jobs[0].Cluster + " " + m.Jobs[0].Name + " " + m.Jobs[0].Phase + " " + m.Jobs[0].Preflight, "alpha ml/train Completed Fits"},
		{"job finished", m.Jobs[0].Finished, "4m ago"},
		{"fleets", strings.Join(m.Fleets, ","), "edge,gpu,prod"},
		{"rollout", m.Rollout.State, "Failed"},
		{"waves", len(m.Waves[0].Waves), 2},
		{"summary", len(m.Summary), 3},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

// TestSecretsNeverAppear: whatever a status ref holds, the page, the
// fragment and the JSON carry no secret.
func TestSecretsNeverAppear(t *testing.T) {
	m := NewModel(snapshot(), waves(), nil)
	var frag, js bytes.Buffer
	if err := WriteFragment(&frag, m); err != nil {
		t.Fatal(err)
	}
	if err := json.NewEncoder(&js).Encode(m); err != nil {
		t.Fatal(err)
	}
	for what, out := range map[string]string{"page": render(t, m, PageOptions{}), "fragment": frag.String(), "json": js.String()} {
		for _, secret := range []string{secretPassword, secretBlob, secretPEM} {
			if strings.Contains(out, secret) {
				t.Errorf("the %s shows %q", what, secret)
			}
		}
		if !strings.Contains(out, redact.Mask) {
			t.Errorf("the %s shows no %s", what, redact.Mask)
		}
		// What is not secret stays.
		if !strings.Contains(out, "apply failed: Secret creds") {
			t.Errorf("the %s lost the error itself", what)
		}
	}
}

func TestLinkerFor(t *testing.T) {
	tests := []struct{ repo, template, want string }{
		{"https://github.com/example/fleet.git", "", "https://github.com/example/fleet/commit/abc"},
		{"https://user:tok@github.com/example/fleet", "", "https://github.com/example/fleet/commit/abc"},
		{"git@github.com:example/fleet.git", "", "https://github.com/example/fleet/commit/abc"},
		{"ssh://git@github.com/example/fleet.git", "", "https://github.com/example/fleet/commit/abc"},
		{"https://gitlab.com/group/sub/fleet.git", "", "https://gitlab.com/group/sub/fleet/-/commit/abc"},
		{"https://GitHub.com/example/fleet/", "", "https://github.com/example/fleet/commit/abc"},
		{"https://github.com/example/fleet/extra", "", ""},
		{"https://github.com/example", "", ""},
		{"https://git.example.com/fleet.git", "", ""},
		{"/srv/git/fleet", "", ""},
		{"./fleet", "", ""},
		{"file:///srv/git/fleet", "", ""},
		{"/srv/git/fleet", "https://git.example.com/fleet/commit/{sha}", "https://git.example.com/fleet/commit/abc"},
	}
	for _, tt := range tests {
		got := ""
		if l := LinkerFor(tt.repo, tt.template); l != nil {
			got = l("abc")
		}
		if got != tt.want {
			t.Errorf("LinkerFor(%q, %q): %q, want %q", tt.repo, tt.template, got, tt.want)
		}
	}
}

// TestPageGolden pins the page's markup (go test ./hub/dashboard -update
// rewrites it).
func TestPageGolden(t *testing.T) {
	m := NewModel(snapshot(), waves(), LinkerFor("https://github.com/example/fleet.git", ""))
	tests := []struct {
		file string
		opts PageOptions
	}{
		{"snapshot.golden.html", PageOptions{}},
		{"served.golden.html", PageOptions{Refresh: 10 * time.Second, FragmentURL: "fragment"}},
	}
	for _, tt := range tests {
		got := render(t, m, tt.opts)
		p := filepath.Join("testdata", tt.file)
		if *update {
			if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("%s differs (go test ./hub/dashboard -update rewrites it)", p)
		}
	}
}

func TestServer(t *testing.T) {
	fail := false
	s := &Server{Refresh: time.Second, Load: func(context.Context) (*Model, error) {
		if fail {
			return nil, errors.New("git: password=" + secretPassword)
		}
		return NewModel(snapshot(), nil, nil), nil
	}}
	ts := httptest.NewServer(s)
	defer ts.Close()
	get := func(method, path string) (int, string, http.Header) {
		req, err := http.NewRequest(method, ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	if code, _, _ := get(http.MethodGet, PathPage); code != http.StatusServiceUnavailable {
		t.Errorf("before the first read: %d", code)
	}
	if err := s.Update(context.Background()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, path string
		code         int
		contains     string
	}{
		{http.MethodGet, PathPage, 200, `data-fragment="fragment" data-interval="1"`},
		{http.MethodGet, PathFragment, 200, `data-cluster="beta" data-state="Failing"`},
		{http.MethodGet, PathJSON, 200, `"state":"Unreachable"`},
		{http.MethodGet, PathHealth, 200, "ok"},
		{http.MethodPost, PathPage, http.StatusMethodNotAllowed, "read-only"},
		{http.MethodGet, "/nope", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		code, body, h := get(tt.method, tt.path)
		if code != tt.code || !strings.Contains(body, tt.contains) {
			t.Errorf("%s %s: %d, want %d with %q", tt.method, tt.path, code, tt.code, tt.contains)
		}
		if code == 200 && h.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: no Content-Security-Policy", tt.path)
		}
	}
	// A failed read keeps the last good page, saying why (redacted).
	fail = true
	if err := s.Update(context.Background()); err == nil {
		t.Fatal("a failing read updated without error")
	}
	_, body, _ := get(http.MethodGet, PathFragment)
	if !strings.Contains(body, "The last refresh failed") || !strings.Contains(body, `data-cluster="alpha"`) || strings.Contains(body, secretPassword) {
		t.Errorf("after a failed read the fragment is:\n%s", body)
	}
}
