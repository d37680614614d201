package monitoring_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/agent/metrics"
	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/agent/verify"
	"github.com/flotilla-gitops/flotilla/hub/dashboard"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
)

const dir = "../../manifests/monitoring"

type counts struct{}

func (counts) Writes() int64  { return 1 }
func (counts) DryRuns() int64 { return 1 }
func (counts) Reads() int64   { return 1 }

// exported is every series name the agent's registry serves, built as
// agent/cmd builds it (agent/metrics, the verification counter, the status
// writer's metrics) with every vector given a child, since a vector without
// one is not gathered. Histograms count as their _bucket, _sum and _count
// series.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New()
	m.CountAPIRequests(counts{})
	refused, err := m.CountVerificationFailures(verify.Reasons)
	if err != nil {
		t.Fatal(err)
	}
	refused(verify.ReasonUnsigned)
	if _, err := statuswriter.NewWriter(statuswriter.WriterOptions{Cluster: "c", URL: "https://git.example.com/fleet.git", Registerer: m.Registry()}); err != nil {
		t.Fatal(err)
	}
	m.ObserveCycle(time.Second, metrics.ResultSuccess)
	m.ObserveFetch(time.Second, metrics.FetchSuccess)
	m.SetAppliedRevision("main@sha1:0")
	m.SetUnits(map[string]bool{"u": true})
	m.AddDriftCorrections(1)
	m.SetManagedObjects(1)
	m.SetLeader(true)
	m.SetPruneHeld(false)
	m.SetRestarts(map[string]int{"lease-lost": 1}, "lease-lost")

	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[f.GetName()+s] = true
			}
		case dto.MetricType_SUMMARY:
			out[f.GetName()+"_sum"], out[f.GetName()+"_count"] = true, true
			out[f.GetName()] = true
		default:
			out[f.GetName()] = true
		}
	}
	return out
}

// metricNames returns the metric names expr selects.
func metricNames(t *testing.T, p parser.Parser, expr string) []string {
	t.Helper()
	e, err := p.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %v", expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			if name == "" {
				t.Errorf("%s: a selector without a metric name", expr)
			}
			names = append(names, name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: selects no metric", expr)
	}
	return names
}

func checkNames(t *testing.T, where string, names []string, known map[string]bool) {
	t.Helper()
	for _, n := range names {
		if !known[n] {
			t.Errorf("%s uses %s, which is not exported", where, n)
		}
	}
}

// dashboardExported is every series name flotilla dashboard serves at
// /metrics, with a rollout in every state so each vector has children.
func dashboardExported(t *testing.T) map[string]bool {
	t.Helper()
	m := dashboard.NewMetrics()
	var ps []*rollout.Progress
	for _, s := range rollout.ProgressStates {
		ps = append(ps, &rollout.Progress{Application: strings.ToLower(string(s)), Revision: "sha256:a", State: s,
			Waves: []rollout.WaveProgress{{Name: "canary", Clusters: []rollout.ClusterProgress{{Cluster: "a", Phase: rollout.PhaseReady}}}}})
	}
	m.Set(ps, time.Now())
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		out[f.GetName()] = true
	}
	return out
}

// TestRulesParseAndUseExportedMetrics: the PrometheusRule's spec is a valid
// Prometheus rules file (rulefmt: fields, durations, alert names, PromQL,
// annotation templates), holds the alerts the docs promise, and queries
// only series the agent exports.
func TestRulesParseAndUseExportedMetrics(t *testing.T) {
	alerts := checkRuleFile(t, "prometheusrule.yaml", exported(t))
	want := []string{"FlotillaUnitNotReady", "FlotillaReconcileFailing", "FlotillaGitFetchFailing",
		"FlotillaVerificationRefused", "FlotillaPruneHeld", "FlotillaNoLeader", "FlotillaAgentRestarting"}
	for _, a := range want {
		if !slices.Contains(alerts, a) {
			t.Errorf("alert %s missing; have %v", a, alerts)
		}
	}
}

// TestRolloutRulesUseDashboardMetrics: the example rollout alerts are a
// valid rules file and query only series flotilla dashboard serves, and
// their state matchers name states a rollout has.
func TestRolloutRulesUseDashboardMetrics(t *testing.T) {
	alerts := checkRuleFile(t, "rollout-rules.yaml", dashboardExported(t))
	for _, a := range []string{"FlotillaRolloutHeld", "FlotillaRolloutNotAdvancing", "FlotillaRolloutMetricsStale"} {
		if !slices.Contains(alerts, a) {
			t.Errorf("alert %s missing; have %v", a, alerts)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "rollout-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`state=~?"([^"]+)"`).FindAllStringSubmatch(string(raw), -1) {
		for _, s := range strings.Split(m[1], "|") {
			if !slices.Contains(rollout.ProgressStates, rollout.ProgressState(s)) {
				t.Errorf("rollout-rules.yaml matches state %q; a rollout's states are %v", s, rollout.ProgressStates)
			}
		}
	}
}

// checkRuleFile parses a PrometheusRule of manifests/monitoring as
// Prometheus would, checks every alert's expression against known and its
// labels and annotations, and returns the alert names.
func checkRuleFile(t *testing.T, name string, known map[string]bool) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       map[string]any `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(raw, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.APIVersion != "monitoring.coreos.com/v1" || obj.Kind != "PrometheusRule" {
		t.Fatalf("%s/%s, want monitoring.coreos.com/v1 PrometheusRule", obj.APIVersion, obj.Kind)
	}
	spec, err := yaml.Marshal(obj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, p, promslog.NewNopLogger())
	for _, err := range errs {
		t.Errorf("rulefmt: %v", err)
	}
	if groups == nil {
		t.FailNow()
	}
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			checkNames(t, "alert "+r.Alert, metricNames(t, p, r.Expr), known)
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want a severity label, a summary and a description", r.Alert)
			}
		}
	}
	return alerts
}

// panel is the part of a Grafana panel the test reads.
type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a row's
}

// labelValues is Grafana's variable query label_values(SELECTOR, LABEL).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_]\w*\)$`)

// TestDashboardQueriesExportedMetrics: every panel of the dashboard has
// queries that parse as PromQL and use only exported series, every
// flotilla_* family the agent exports has a panel, and the variables'
// queries select exported series too.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(dir, "flotilla-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string  `json:"uid"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" {
		t.Error("the dashboard has no uid: a re-import would duplicate it")
	}
	p := parser.NewParser(parser.Options{})
	known := exported(t)
	used := map[string]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, pn := range ps {
			walk(pn.Panels)
			if len(pn.Panels) > 0 {
				continue
			}
			if len(pn.Targets) == 0 {
				t.Errorf("panel %q has no query", pn.Title)
			}
			for _, tg := range pn.Targets {
				names := metricNames(t, p, tg.Expr)
				checkNames(t, "panel "+pn.Title, names, known)
				for _, n := range names {
					used[n] = true
				}
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(SELECTOR, LABEL)", v.Name, v.Definition)
			continue
		}
		checkNames(t, "variable "+v.Name, metricNames(t, p, m[1]), known)
	}
	// A new flotilla_* metric gets a panel; histograms count through any of
	// their series.
	for name := range known {
		if !strings.HasPrefix(name, "flotilla_") {
			continue
		}
		family := name
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, s); ok && known[base+"_bucket"] {
				family = base
			}
		}
		if !used[name] && !used[family+"_bucket"] && !used[family+"_sum"] && !used[family+"_count"] {
			t.Errorf("no dashboard panel queries %s", name)
		}
	}
}
