package bench

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// peerReport is BenchmarkPeerFlux's results file.
type peerReport struct {
	runs               []peerRun
	started            time.Time
	loadStart, loadEnd string
	// source is the raw log the figures were recomputed from (empty for a
	// run): the header then points at it instead of this machine.
	source string
}

// peerRow is one figure of the table; every figure is lower-is-better, and
// the ratio is Flux ÷ Flotilla (how many times Flotilla is ahead). why says
// why Flotilla is behind where it is (written next to the figure).
type peerRow struct {
	name  string
	unit  string
	phase string // "cold", "change", "idle" or "" (measured at the end)
	// settle: the figure the settle cap bounds (shown as a lower bound
	// when Flux ran into it).
	settle bool
	get    func(peerSide) float64
	why    string
}

const kib = 1024.0

var peerRows = []peerRow{
	{name: "cold apply: process start → every unit applied", unit: "s", phase: "cold", get: func(s peerSide) float64 { return s.cold.Seconds() }},
	{name: "cold apply: CPU", unit: "s", phase: "cold", get: func(s peerSide) float64 { return s.coldCPU.Seconds() }},
	{name: "cold apply: API writes", phase: "cold", get: func(s peerSide) float64 { return s.coldAPI.Writes }},
	{name: "cold apply: API dry-runs", phase: "cold", get: func(s peerSide) float64 { return s.coldAPI.DryRuns }},
	{name: "cold apply: Git bytes served (fetches, ref lists)", unit: "KiB", phase: "cold", get: func(s peerSide) float64 { return float64(s.coldGit.BytesSent) / kib },
		why: "both clone the same commit at depth 1; the agent also lists the refs again for its status push"},
	{name: "cold apply: Git bytes received (requests, pushes)", unit: "KiB", phase: "cold", get: func(s peerSide) float64 { return float64(s.coldGit.BytesReceived) / kib },
		why: "the agent commits its status to Git through the Git server; Flux writes status to the API instead (see the API writes)"},
	{name: "one-unit change: push → changed object applied", unit: "s", phase: "change", get: func(s peerSide) float64 { return s.changeSeen.Seconds() }},
	{name: "one-unit change: push → every unit at the new commit", unit: "s", phase: "change", settle: true, get: func(s peerSide) float64 { return s.changeSettle.Seconds() },
		why: "the agent's figure includes its status commit to Git"},
	{name: "one-unit change: API writes", phase: "change", get: func(s peerSide) float64 { return s.changeAPI.Writes }},
	{name: "one-unit change: API dry-runs", phase: "change", get: func(s peerSide) float64 { return s.changeAPI.DryRuns }},
	{name: "one-unit change: Git bytes served", unit: "KiB", phase: "change", get: func(s peerSide) float64 { return float64(s.changeGit.BytesSent) / kib },
		why: "the agent also lists refs for its status push"},
	{name: "one-unit change: Git bytes received", unit: "KiB", phase: "change", get: func(s peerSide) float64 { return float64(s.changeGit.BytesReceived) / kib },
		why: "the agent's status commit is pushed through the Git server; Flux's status goes to the API"},
	{name: "idle 1 min: CPU", unit: "s", phase: "idle", get: func(s peerSide) float64 { return s.idleCPU.Seconds() }},
	{name: "idle 1 min: API writes", phase: "idle", get: func(s peerSide) float64 { return s.idleAPI.Writes }},
	{name: "idle 1 min: API dry-runs", phase: "idle", get: func(s peerSide) float64 { return s.idleAPI.DryRuns }},
	{name: "idle 1 min: Git requests (1 s polls)", phase: "idle", get: func(s peerSide) float64 { return float64(peerRequests(s.idleGit)) },
		why: "both poll once a second: a difference of a poll or two is where the minute's window fell"},
	{name: "idle 1 min: Git bytes served + received (1 s polls)", unit: "KiB", phase: "idle", get: func(s peerSide) float64 { return float64(peerBytes(s.idleGit)) / kib },
		why: "the fleet repo's ref list, which every v0 poll downloads, also holds the agent's status ref (issue 17 part 1)"},
	{name: "idle Git at default intervals (computed: polls/h × bytes per idle poll + heartbeats/h × status push)", unit: "KiB/h", phase: "idle", get: peerDefaultIdleGit,
		why: "the agent's status heartbeat (an unchanged status committed every 10 min) goes through Git; Flux has no heartbeat"},
	{name: "peak RSS (Flux: sum of both controllers' peaks)", unit: "MiB", get: func(s peerSide) float64 { return float64(s.peak) / (1 << 20) }},
	{name: "steady RSS after the idle minute (Flux: both controllers)", unit: "MiB", phase: "idle", get: func(s peerSide) float64 { return float64(s.steady) / (1 << 20) }},
}

// peerPolls is how many times a side asked for the refs, whatever the
// protocol: a v0 ref advertisement (GET info/refs; source-controller's
// go-git) or a v2 ls-refs (flotilla-agent against a v2 server). The table
// and the raw log both count polls here; counting info/refs alone gave the
// v2 agent 0 polls while its log showed them. A v2 client that GETs
// info/refs for capabilities before each ls-refs (the git CLI) would count
// twice; neither side here does.
func peerPolls(g gitserver.Stats) int { return g.InfoRefs + g.LsRefs }

// peerRequests is every request the Git server counted, refused ones too.
func peerRequests(g gitserver.Stats) int {
	return g.InfoRefs + g.LsRefs + g.UploadPacks + g.ReceivePackInfoRefs + g.ReceivePacks + g.Unauthorized
}

// peerBytes is the bytes served and received.
func peerBytes(g gitserver.Stats) int64 { return g.BytesSent + g.BytesReceived }

// peerIdleGitLog is the raw log's account of a side's idle Git traffic:
// the table's idle Git figures, from the same functions, and the counters.
func peerIdleGitLog(s peerSide) string {
	g := s.idleGit
	return fmt.Sprintf("Git %d requests, %d polls (v0 info/refs + v2 ls-refs), %d bytes, %.1f KiB/h at default intervals, from %+v",
		peerRequests(g), peerPolls(g), peerBytes(g), peerDefaultIdleGit(s), g)
}

// peerDefaultIdleGit is the idle Git traffic per hour at default intervals:
// each side's measured bytes per idle poll times its default polls per hour,
// plus for the agent its status heartbeats, each costing about what its
// status push after the one-unit change cost. With no poll counted it is
// NaN (shown as such), not 0: a 0 here once hid uncounted v2 polls.
func peerDefaultIdleGit(s peerSide) float64 {
	g := s.idleGit
	polls := peerPolls(g)
	if polls == 0 {
		return math.NaN()
	}
	perPoll := float64(peerBytes(g)) / float64(polls)
	total := peerDefaultPollsPerHour * perPoll
	if c := s.changeGit; c.ReceivePacks > 0 && s.heartbeat {
		// A push is a receive-pack ref list (about one poll's bytes) plus the pack.
		total += peerDefaultHeartbeatsPerHour * (perPoll + float64(c.ReceivePackBytes)/float64(c.ReceivePacks))
	}
	return total / kib
}

// measured reports whether a side has figures for phase.
func (r peerRun) measured(phase string) bool {
	return !r.fluxTimedOut || phase == "cold" || phase == ""
}

func peerNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "no poll counted"
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// peerRatio is flux ÷ flotilla; worse reports Flotilla being behind.
func peerRatio(flux, agent float64) (ratio string, worse bool) {
	switch {
	case math.IsNaN(flux) || math.IsNaN(agent):
		return "", false
	case flux == 0 && agent == 0:
		return "=", false
	case agent == 0:
		return "∞", false
	}
	r := flux / agent
	if r >= 10 {
		return fmt.Sprintf("%.0f×", r), false
	}
	return fmt.Sprintf("%.2f×", r), r < 1
}

func (p peerReport) markdown() string {
	var sb strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&sb, "# Flux vs flotilla-agent, side by side (BenchmarkPeerFlux)\n\n")
	if p.source != "" {
		fmt.Fprintf(&sb, "Recomputed from the raw counters in `%s` (the run, its machine and its command are in that file's header; regenerate this table from it with `go test ./test/bench -run TestPeerReportFromRawLog -short -update`), by the table code that counts every Git poll, protocol v0 info/refs and v2 ls-refs alike: not a run of its own. "+
			"Memory is the log's whole MiB; the flags are not in the log (docs/peer-flux.md, What runs, has them).\n\n", p.source)
	} else {
		fmt.Fprintf(&sb, "Command: `make bench-flux` (= `tools/build.sh bin flux && go test -run '^$' -bench 'PeerFlux$' -benchtime 1x -timeout 150m ./test/bench/`), raw log in `test/results/bench-peer-flux.txt`.\n\n")
		fmt.Fprintf(&sb, "Run %s on %s (%d CPUs, %s/%s, %s). Machine load average (1, 5, 15 min) at start **%s**, at end **%s**: the machine was shared with other builds and tests, so timings are noisy; the request and byte counts are not.\n\n",
			p.started.UTC().Format(time.RFC3339), host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), p.loadStart, p.loadEnd)
	}
	sb.WriteString("Setup: each system on its own fresh minimal API server (kube-apiserver v1.36.3 + etcd from tools/, priority and fairness on, the default), one after the other (Flux first), " +
		"applying the objects of `BenchmarkAgent/flux-shape` (units × Deployment with 0 replicas, ServiceAccount, Service, Ingress, in 10 namespaces bench-0…9) " +
		"from two identical repos (`fleet-flux`, `fleet`: the same rendered fleet repo) on one Git smart-HTTP server (test/gitserver). " +
		"Flux: one GitRepository and one Kustomization per unit (path `apps/<unit>/manifests`, targetNamespace, prune, no wait); its namespaces are created before it starts. " +
		"Flotilla: the fleet repo's one cluster, one unit per application; it creates the namespaces itself and commits its status through the Git server. " +
		"Both poll Git every 1 s and check every unit for drift every 10 minutes (Flux: the Kustomization interval `flux bootstrap` sets; Flotilla: --interval), so the idle minute holds polls and no drift check. " +
		"Timeouts: Flux's cold apply is capped (FLOTILLA_BENCH_PEER_FLUX_TIMEOUT); a capped figure is shown as > and the later phases of that size are not run.\n\n")
	sb.WriteString("Figures: API writes are the API server's `apiserver_request_total` for POST, PUT, PATCH, APPLY, DELETE without dryRun, leaving out leases (the API server's own heartbeats; neither system elects a leader here); dry-runs are the same verbs with dryRun=All. " +
		"Reads are not compared: they include the benchmark's own polling of Flux's Kustomizations. Git bytes are response bytes served and request bytes received by the Git server for that side's repo; Git requests are every request to it, and a poll is one ref list whatever the protocol (a v0 info/refs advertisement or a v2 ls-refs). " +
		"CPU is user+system time of the processes (Flux: both controllers). Ratio = Flux ÷ Flotilla (> 1: Flotilla ahead); where Flotilla is behind, the reason is written next to the figure.\n\n")
	if len(p.runs) > 0 && len(p.runs[0].agent.flags) > 0 {
		sb.WriteString("Flags:\n\n")
		for _, f := range append(p.runs[0].flux.flags, p.runs[0].agent.flags...) {
			fmt.Fprintf(&sb, "- `%s`\n", strings.TrimSpace(f))
		}
		sb.WriteString("\nFlux's client-side limits (--kube-api-qps 50, --kube-api-burst 300) are left at their defaults; with priority and fairness on in the API server the server side decides how fast requests are served (the issue notes these flags are then inert).\n\n")
	}
	sb.WriteString("| figure | units | Flux | Flotilla | ratio | why Flotilla is behind |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, row := range peerRows {
		for _, r := range p.runs {
			name := row.name
			if row.unit != "" {
				name += " (" + row.unit + ")"
			}
			agent := row.get(r.agent)
			if !r.measured(row.phase) {
				fmt.Fprintf(&sb, "| %s | %d | not measured | %s | | |\n", name, r.units, peerNum(agent))
				continue
			}
			flux := row.get(r.flux)
			ratio, worse := peerRatio(flux, agent)
			fluxCell := peerNum(flux)
			if (r.fluxTimedOut && row.phase == "cold") || (r.flux.settleCapped && row.settle) {
				fluxCell = "> " + fluxCell
				ratio = "> " + ratio
			}
			why := ""
			switch {
			case worse && r.fluxTimedOut && row.phase == "cold":
				why = fmt.Sprintf("not a comparison: Flux's figure covers only the %d of %d units it applied before the cap", r.flux.applied, r.units)
			case worse:
				why = row.why
				if why == "" {
					why = "**no reason recorded**"
				}
			}
			fmt.Fprintf(&sb, "| %s | %d | %s | %s | %s | %s |\n", name, r.units, fluxCell, peerNum(agent), ratio, why)
		}
	}
	for _, r := range p.runs {
		if r.note != "" {
			fmt.Fprintf(&sb, "\n%d units: %s\n", r.units, r.note)
		}
	}
	return sb.String()
}

// The raw log's lines that carry a phase's figures (the b.Logf calls of
// peer_flux_bench_test.go, in their older wordings too).
var (
	peerLogStart       = regexp.MustCompile(`(\d+) units: Flux first`)
	peerLogFluxCold    = regexp.MustCompile(`Flux cold: (\d+) of \d+ units applied at \S+ in (\S+); CPU (\S+);`)
	peerLogFluxChange  = regexp.MustCompile(`Flux one-unit change: applied (\S+) after the push, (?:every Kustomization|(\d+) of \d+ Kustomizations) at the new commit after (\S+);`)
	peerLogAgentCold   = regexp.MustCompile(`flotilla-agent cold: \d+ units applied in (\S+) \(cycle \S+\); CPU (\S+);`)
	peerLogAgentChange = regexp.MustCompile(`flotilla-agent one-unit change: applied (\S+) after the push, cycle and status commit done after (\S+);`)
	peerLogIdle        = regexp.MustCompile(`(source-controller|flotilla-agent) idle \S+: CPU (\S+);.*RSS (\d+) MiB, peak (\d+) MiB`)
	peerLogAPI         = regexp.MustCompile(`API \{Writes:(\S+) DryRuns:(\S+) `)
	peerLogGit         = regexp.MustCompile(`\{(InfoRefs:[^}]*)\}`)
	peerLogCounter     = regexp.MustCompile(`(\w+):(\d+)`)
)

// peerRunsFromLog rebuilds BenchmarkPeerFlux's figures from its raw log,
// so that a table can be recomputed from the counters a run recorded. The
// log has no flags, no notes and memory only in whole MiB.
func peerRunsFromLog(log string) ([]peerRun, error) {
	var runs []peerRun
	for i, line := range strings.Split(log, "\n") {
		if m := peerLogStart.FindStringSubmatch(line); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			runs = append(runs, peerRun{units: n})
			continue
		}
		if len(runs) == 0 {
			continue
		}
		r := &runs[len(runs)-1]
		if err := r.readLogLine(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	for _, r := range runs {
		if r.flux.cold == 0 || r.agent.cold == 0 {
			return nil, fmt.Errorf("run of %d units: a side's cold apply is not in the log", r.units)
		}
	}
	return runs, nil
}

// readLogLine reads the figures of one log line into r, if it has any.
func (r *peerRun) readLogLine(line string) error {
	var (
		ds   []string         // the line's durations, in the order of dsts
		dsts []*time.Duration // where they go
		api  *apiCounts
		git  *gitserver.Stats
	)
	if m := peerLogFluxCold.FindStringSubmatch(line); m != nil {
		f := &r.flux
		ds, dsts, api, git = m[2:], []*time.Duration{&f.cold, &f.coldCPU}, &f.coldAPI, &f.coldGit
		applied, err := strconv.Atoi(m[1])
		if err != nil {
			return err
		}
		f.applied, r.fluxTimedOut = applied, applied < r.units
	} else if m := peerLogFluxChange.FindStringSubmatch(line); m != nil {
		f := &r.flux
		ds, dsts, api, git = []string{m[1], m[3]}, []*time.Duration{&f.changeSeen, &f.changeSettle}, &f.changeAPI, &f.changeGit
		f.changed, f.settled = true, r.units
		if m[2] != "" {
			settled, err := strconv.Atoi(m[2])
			if err != nil {
				return err
			}
			f.settled, f.settleCapped = settled, settled < r.units
		}
	} else if m := peerLogAgentCold.FindStringSubmatch(line); m != nil {
		a := &r.agent
		ds, dsts, api, git = m[1:], []*time.Duration{&a.cold, &a.coldCPU}, &a.coldAPI, &a.coldGit
		a.applied, a.heartbeat = r.units, true
	} else if m := peerLogAgentChange.FindStringSubmatch(line); m != nil {
		a := &r.agent
		ds, dsts, api, git = m[1:], []*time.Duration{&a.changeSeen, &a.changeSettle}, &a.changeAPI, &a.changeGit
		a.changed, a.heartbeat = true, true
	} else if m := peerLogIdle.FindStringSubmatch(line); m != nil {
		side := &r.agent
		if m[1] == "source-controller" {
			side = &r.flux
		}
		ds, dsts, api, git = m[2:3], []*time.Duration{&side.idleCPU}, &side.idleAPI, &side.idleGit
		for i, dst := range []*int64{&side.steady, &side.peak} {
			mib, err := strconv.ParseInt(m[3+i], 10, 64)
			if err != nil {
				return err
			}
			*dst = mib << 20
		}
	} else {
		return nil
	}
	for i, dst := range dsts {
		d, err := time.ParseDuration(ds[i])
		if err != nil {
			return err
		}
		*dst = d
	}
	var err error
	if *api, err = peerLogAPICounts(line); err != nil {
		return err
	}
	*git, err = peerLogGitStats(line)
	return err
}

func peerLogAPICounts(line string) (apiCounts, error) {
	m := peerLogAPI.FindStringSubmatch(line)
	if m == nil {
		return apiCounts{}, fmt.Errorf("no API counts in %q", line)
	}
	var out apiCounts
	var err error
	if out.Writes, err = strconv.ParseFloat(m[1], 64); err != nil {
		return out, fmt.Errorf("API writes: %w", err)
	}
	if out.DryRuns, err = strconv.ParseFloat(m[2], 64); err != nil {
		return out, fmt.Errorf("API dry-runs: %w", err)
	}
	return out, nil
}

// peerLogGitStats reads the Git server's counters as the log prints them
// (%+v of gitserver.Stats); a counter the struct lacks is an error, one
// the log lacks (LsRefs before it was counted) stays 0.
func peerLogGitStats(line string) (gitserver.Stats, error) {
	var st gitserver.Stats
	m := peerLogGit.FindStringSubmatch(line)
	if m == nil {
		return st, fmt.Errorf("no Git counters in %q", line)
	}
	v := reflect.ValueOf(&st).Elem()
	for _, c := range peerLogCounter.FindAllStringSubmatch(m[1], -1) {
		f := v.FieldByName(c[1])
		if !f.IsValid() {
			return st, fmt.Errorf("unknown Git counter %s", c[1])
		}
		n, err := strconv.ParseInt(c[2], 10, 64)
		if err != nil {
			return st, fmt.Errorf("Git counter %s: %w", c[1], err)
		}
		f.SetInt(n)
	}
	return st, nil
}

func TestParseAPIRequests(t *testing.T) {
	metrics := `# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="All",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="kustomize.toolkit.fluxcd.io",resource="kustomizations",scope="resource",subresource="status",verb="PATCH",version="v1"} 1e+03
`
	got := parseAPIRequests(metrics)
	want := apiCounts{Writes: 1005, DryRuns: 5, ByResource: map[string]float64{"POST deployments": 3, "APPLY deployments": 2, "PATCH kustomizations/status": 1000}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseAPIRequests = %+v, want %+v", got, want)
	}
}

func TestPeerRatio(t *testing.T) {
	for _, tc := range []struct {
		flux, agent float64
		want        string
		worse       bool
	}{
		{flux: 100, agent: 5, want: "20×"},
		{flux: 3, agent: 2, want: "1.50×"},
		{flux: 1, agent: 2, want: "0.50×", worse: true},
		{flux: 5, agent: 0, want: "∞"},
		{flux: 0, agent: 0, want: "="},
	} {
		got, worse := peerRatio(tc.flux, tc.agent)
		if got != tc.want || worse != tc.worse {
			t.Errorf("peerRatio(%v, %v) = %q, %v; want %q, %v", tc.flux, tc.agent, got, worse, tc.want, tc.worse)
		}
	}
}

// TestPeerReportMarkdown checks that a figure where Flotilla is behind
// carries its reason and that a Flux run cut short shows no later figures.
func TestPeerReportMarkdown(t *testing.T) {
	agent := peerSide{flags: []string{"flotilla-agent --interval 1m"}, cold: 10 * time.Second, coldGit: gitserver.Stats{BytesReceived: 4096}}
	flux := peerSide{flags: []string{"source-controller"}, cold: 100 * time.Second, coldGit: gitserver.Stats{BytesReceived: 1024}}
	settling := flux
	settling.changed, settling.changeSettle, settling.settleCapped = true, 900*time.Second, true
	agent.changed, agent.changeSettle = true, 3*time.Second
	md := peerReport{runs: []peerRun{{units: 200, flux: settling, agent: agent}, {units: 1000, flux: flux, agent: agent, fluxTimedOut: true, note: "cut short"}}}.markdown()
	for _, want := range []string{
		"| one-unit change: push → every unit at the new commit (s) | 200 | > 900 | 3.00 | > 300× |  |",
		"| cold apply: process start → every unit applied (s) | 200 | 100 | 10.0 | 10× |  |",
		"| cold apply: process start → every unit applied (s) | 1000 | > 100 | 10.0 | > 10× |  |",
		"| cold apply: Git bytes received (requests, pushes) (KiB) | 200 | 1.00 | 4.00 | 0.25× | the agent commits its status",
		"| one-unit change: API writes | 1000 | not measured | 0 | | |",
		"| 1000 | > 1.00 | 4.00 | > 0.25× | not a comparison: Flux's figure covers only the 0 of 1000 units",
		"1000 units: cut short",
		"`flotilla-agent --interval 1m`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "no reason recorded") {
		t.Errorf("a figure where Flotilla is behind has no reason:\n%s", md)
	}
}

// The idle Git rows of the table, by name (units left out).
const (
	peerRowIdleRequests = "idle 1 min: Git requests (1 s polls)"
	peerRowIdleKiB      = "idle 1 min: Git bytes served + received (1 s polls) (KiB)"
	peerRowIdleKiBh     = "idle Git at default intervals (computed: polls/h × bytes per idle poll + heartbeats/h × status push) (KiB/h)"
)

// peerCells are the Flux, Flotilla and ratio cells of a row of md.
func peerCells(t *testing.T, md, row string, units int) []string {
	t.Helper()
	prefix := fmt.Sprintf("| %s | %d | ", row, units)
	for _, line := range strings.Split(md, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return strings.Split(rest, " | ")[:3]
		}
	}
	t.Fatalf("no row %q of %d units in:\n%s", row, units, md)
	return nil
}

// TestPeerReportIdleGit checks the table's idle Git figures against the
// Git server's counters they come from, whatever the protocol of the polls:
// a v2 agent's ls-refs once counted as no poll at all (0 requests, 0 KiB/h,
// ratio ∞) while the raw log showed them.
func TestPeerReportIdleGit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		flux, agent peerSide
		// Sums of the counters above, written out: requests, KiB, KiB/h.
		wantFlux, wantAgent [3]float64
	}{{
		name:     "v0 Flux, v2 agent (bench-peer-flux-200.txt)",
		flux:     peerSide{idleGit: gitserver.Stats{InfoRefs: 60, BytesSent: 25500}},
		agent:    peerSide{heartbeat: true, idleGit: gitserver.Stats{LsRefs: 59, BytesSent: 3835, BytesReceived: 4838}, changeGit: gitserver.Stats{ReceivePacks: 1, ReceivePackBytes: 9598}},
		wantFlux: [3]float64{60, 25500.0 / 1024, 60 * (25500.0 / 60) / 1024},
		wantAgent: [3]float64{59, (3835 + 4838) / 1024.0,
			(60*((3835+4838)/59.0) + 6*((3835+4838)/59.0+9598)) / 1024},
	}, {
		name:      "v0 both (bench-peer-flux.txt)",
		flux:      peerSide{idleGit: gitserver.Stats{InfoRefs: 58, BytesSent: 24650}},
		agent:     peerSide{heartbeat: true, idleGit: gitserver.Stats{InfoRefs: 59, BytesSent: 29677}, changeGit: gitserver.Stats{ReceivePacks: 1, ReceivePackBytes: 9628}},
		wantFlux:  [3]float64{58, 24650.0 / 1024, 60 * (24650.0 / 58) / 1024},
		wantAgent: [3]float64{59, 29677.0 / 1024, (60*(29677.0/59) + 6*(29677.0/59+9628)) / 1024},
	}, {
		// A refused request is a request but not a poll; two heartbeat
		// pushes average out.
		name:      "v2 agent with a refused request and two pushes",
		flux:      peerSide{idleGit: gitserver.Stats{InfoRefs: 60, BytesSent: 25500}},
		agent:     peerSide{heartbeat: true, idleGit: gitserver.Stats{LsRefs: 56, Unauthorized: 1, BytesSent: 3640, BytesReceived: 4592}, changeGit: gitserver.Stats{ReceivePacks: 2, ReceivePackBytes: 20000}},
		wantFlux:  [3]float64{60, 25500.0 / 1024, 25500.0 / 1024},
		wantAgent: [3]float64{57, (3640 + 4592) / 1024.0, (60*((3640+4592)/56.0) + 6*((3640+4592)/56.0+10000)) / 1024},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.flux.changed, tc.agent.changed = true, true
			md := peerReport{runs: []peerRun{{units: 200, flux: tc.flux, agent: tc.agent}}}.markdown()
			for i, row := range []string{peerRowIdleRequests, peerRowIdleKiB, peerRowIdleKiBh} {
				cells := peerCells(t, md, row, 200)
				wantRatio, _ := peerRatio(tc.wantFlux[i], tc.wantAgent[i])
				if want := []string{peerNum(tc.wantFlux[i]), peerNum(tc.wantAgent[i]), wantRatio}; !reflect.DeepEqual(cells, want) {
					t.Errorf("%s: table says %q, counters say %q", row, cells, want)
				}
				if tc.wantAgent[i] == 0 || cells[1] == "0" || cells[2] == "∞" || cells[2] == "" {
					t.Errorf("%s: Flotilla's figure %q (ratio %q) must be non-zero with a finite ratio", row, cells[1], cells[2])
				}
			}
			// The raw log's line is made from the same figures.
			log := peerIdleGitLog(tc.agent)
			if want := fmt.Sprintf("Git %.0f requests, %d polls (v0 info/refs + v2 ls-refs), %d bytes, %.1f KiB/h", tc.wantAgent[0], peerPolls(tc.agent.idleGit), peerBytes(tc.agent.idleGit), tc.wantAgent[2]); !strings.HasPrefix(log, want) {
				t.Errorf("raw log line %q, want it to start %q", log, want)
			}
		})
	}
}

// TestPeerPollsNone: with no poll counted the per-poll figure is shown as
// missing, not as 0 KiB/h with a ratio of ∞ (how uncounted v2 polls hid).
func TestPeerPollsNone(t *testing.T) {
	md := peerReport{runs: []peerRun{{units: 200,
		flux:  peerSide{changed: true, idleGit: gitserver.Stats{InfoRefs: 60, BytesSent: 25500}},
		agent: peerSide{changed: true, heartbeat: true, idleGit: gitserver.Stats{BytesSent: 100}}}}}.markdown()
	if got, want := peerCells(t, md, peerRowIdleKiBh, 200), []string{"24.9", "no poll counted", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("idle KiB/h cells %q, want %q", got, want)
	}
}

var updatePeer = flag.Bool("update", false, "rewrite the peer tables recomputed from raw logs (test/results/bench-peer-flux-*.md)")

// TestPeerReportFromRawLog rebuilds the peer table from the raw counters
// of committed runs: the table's idle Git figures must be the sums of the
// logged counters, v2 ls-refs polls included, and the committed tables
// must be what the counters give (-update rewrites a recomputed one).
func TestPeerReportFromRawLog(t *testing.T) {
	results := filepath.Join(agentproc.ModuleRoot(), "test", "results")
	for _, tc := range []struct {
		log, table string
		// recomputed: the table is written from the log (whole file
		// compared); otherwise it is the run's own and only its idle Git
		// cells are compared.
		recomputed bool
		v2         bool // the log holds v2 ls-refs polls
	}{
		{log: "bench-peer-flux-200.txt", table: "bench-peer-flux-200.md", recomputed: true, v2: true},
		{log: "bench-peer-flux.txt", table: "bench-peer-flux.md"},
	} {
		t.Run(tc.log, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(results, tc.log))
			if err != nil {
				t.Fatal(err)
			}
			runs, err := peerRunsFromLog(string(raw))
			if err != nil {
				t.Fatalf("%s: %v", tc.log, err)
			}
			md := peerReport{runs: runs, source: "test/results/" + tc.log}.markdown()
			lsRefs := 0
			for _, r := range runs {
				for _, side := range []struct {
					name string
					s    peerSide
					cell int
				}{{"Flux", r.flux, 0}, {"Flotilla", r.agent, 1}} {
					if side.name == "Flux" && !r.measured("idle") {
						continue
					}
					g := side.s.idleGit
					lsRefs += g.LsRefs
					requests := g.InfoRefs + g.LsRefs + g.UploadPacks + g.ReceivePackInfoRefs + g.ReceivePacks + g.Unauthorized
					bytes := g.BytesSent + g.BytesReceived
					for row, want := range map[string]float64{peerRowIdleRequests: float64(requests), peerRowIdleKiB: float64(bytes) / 1024} {
						if got := peerCells(t, md, row, r.units)[side.cell]; got != peerNum(want) || want == 0 {
							t.Errorf("%d units, %s, %s: table %s, counters %s (must be non-zero)", r.units, side.name, row, got, peerNum(want))
						}
					}
				}
				if r.measured("idle") {
					if ratio := peerCells(t, md, peerRowIdleKiBh, r.units)[2]; ratio == "" || strings.Contains(ratio, "∞") {
						t.Errorf("%d units: idle KiB/h ratio %q, want a finite one", r.units, ratio)
					}
				}
			}
			if tc.v2 && lsRefs == 0 {
				t.Errorf("%s: no v2 ls-refs poll read from the log", tc.log)
			}

			path := filepath.Join(results, tc.table)
			if tc.recomputed && *updatePeer {
				if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			committed, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.recomputed {
				if string(committed) != md {
					t.Errorf("%s is not what %s's counters give; rerun with -update:\n%s", tc.table, tc.log, md)
				}
				return
			}
			for _, r := range runs {
				for _, row := range []string{peerRowIdleRequests, peerRowIdleKiB, peerRowIdleKiBh} {
					if got, want := peerCells(t, string(committed), row, r.units), peerCells(t, md, row, r.units); !reflect.DeepEqual(got, want) {
						t.Errorf("%s, %d units, %s: committed %q, the log's counters give %q", tc.table, r.units, row, got, want)
					}
				}
			}
		})
	}
}

// TestPeerIdleLogLine: the idle line the bench logs now (Git figures and
// counters) reads back into the counters it was made from.
func TestPeerIdleLogLine(t *testing.T) {
	for _, side := range []peerSide{
		{flags: []string{"flotilla-agent --interval 10m0s"}, heartbeat: true, idleCPU: 180 * time.Millisecond, idleAPI: apiCounts{Writes: 6},
			idleGit: gitserver.Stats{LsRefs: 59, BytesSent: 3835, BytesReceived: 4838}, steady: 38 << 20, peak: 94 << 20},
		{flags: []string{"source-controller --storage-path=<tmp>"}, idleCPU: 350 * time.Millisecond, idleAPI: apiCounts{Writes: 8},
			idleGit: gitserver.Stats{InfoRefs: 60, BytesSent: 25500}, steady: 225 << 20, peak: 253 << 20},
	} {
		line := side.idleLogLine()
		r := peerRun{units: 200}
		if err := r.readLogLine(line); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got := r.agent
		if !side.heartbeat {
			got = r.flux
		}
		if got.idleGit != side.idleGit || got.idleCPU != side.idleCPU || got.idleAPI.Writes != side.idleAPI.Writes || got.steady != side.steady || got.peak != side.peak {
			t.Errorf("%q read back as %+v", line, got)
		}
	}
}
