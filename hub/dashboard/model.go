package dashboard

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Model is what the page shows; its JSON is Server's /fleet.json.
type Model struct {
	Repo     string       `json:"repo"`
	Branch   string       `json:"branch"`
	Head     Revision     `json:"head"`
	Time     time.Time    `json:"time"`
	Summary  []StateCount `json:"summary"`
	Fleets   []string     `json:"fleets"`
	States   []string     `json:"states"`
	Clusters []Cluster    `json:"clusters"`
	Rollout  *Rollout     `json:"rollout,omitempty"`
	Waves    []Waves      `json:"waves,omitempty"`
	Jobs     []Job        `json:"jobs"`
	Warnings []string     `json:"warnings,omitempty"`
	// Error is why the last refresh failed; the rest is the last good read.
	Error string `json:"error,omitempty"`
	// QuietUnits are the units of the Quiet clusters, by cluster, compact:
	// [name, revision, revision URL, objects, drift corrections], the
	// revision "" when it is the cluster's applied one.
	QuietUnits map[string][][]any `json:"-"`
	// progress are the waves as evaluated, for the metrics.
	progress []*rollout.Progress
}

// Revision is a commit as shown: the short form, and its forge page when
// known.
type Revision struct {
	Full  string `json:"full,omitempty"`
	Short string `json:"short,omitempty"`
	URL   string `json:"url,omitempty"`
}

// StateCount is one entry of the summary.
type StateCount struct {
	State string `json:"state"`
	Count int    `json:"count"`
}

// Cluster is one cluster's row and its units.
type Cluster struct {
	Name   string   `json:"name"`
	State  string   `json:"state"`
	Reason string   `json:"reason,omitempty"`
	Fleets []string `json:"fleets,omitempty"`
	// Labels are "key=value", sorted.
	Labels       []string `json:"labels,omitempty"`
	Applied      Revision `json:"applied"`
	Desired      Revision `json:"desired"`
	UnitsReady   int      `json:"unitsReady"`
	UnitsTotal   int      `json:"unitsTotal"`
	Jobs         string   `json:"jobs,omitempty"`
	Heartbeat    string   `json:"heartbeat,omitempty"`
	HeartbeatAge string   `json:"heartbeatAge,omitempty"`
	// UnreachableAfter is the silence after which the cluster counts as
	// Unreachable.
	UnreachableAfter string   `json:"unreachableAfter"`
	AgentVersion     string   `json:"agentVersion,omitempty"`
	Kubernetes       string   `json:"kubernetesVersion,omitempty"`
	LastError        string   `json:"lastError,omitempty"`
	Progress         string   `json:"progress,omitempty"`
	Warnings         []string `json:"warnings,omitempty"`
	Units            []Unit   `json:"units,omitempty"`
	// Quiet: every unit Ready without an error, so the page sends the
	// units as data (Model.QuietUnits) and draws them when opened; a
	// thousand clusters of twenty units would otherwise be megabytes of
	// rows nobody opens.
	Quiet bool `json:"-"`
	// DriftCorrections is the sum over the units.
	DriftCorrections int64 `json:"driftCorrections"`
}

// Failing reports whether the row should open its units.
func (c Cluster) Failing() bool { return c.State == string(fleetview.StateFailing) }

// Unit is one unit of a cluster.
type Unit struct {
	Name     string   `json:"name"`
	Revision Revision `json:"revision"`
	// Health is Ready, Failing or NotReady; HealthReason the condition's
	// reason and message.
	Health       string `json:"health"`
	HealthReason string `json:"healthReason,omitempty"`
	// Waiting is what the agent waits for while it reconciles the unit.
	Waiting          string `json:"waiting,omitempty"`
	LastError        string `json:"lastError,omitempty"`
	Objects          int    `json:"objects"`
	DriftCorrections int64  `json:"driftCorrections"`
}

// Rollout is the branch head's progress across the fleet.
type Rollout struct {
	Commit  Revision     `json:"commit"`
	Subject string       `json:"subject"`
	Author  string       `json:"author"`
	State   string       `json:"state"`
	Summary []StateCount `json:"summary"`
	// Clusters are those the commit was dispatched to; Unaffected counts
	// the others.
	Clusters   []RolloutTarget `json:"clusters"`
	Unaffected int             `json:"unaffected"`
	Error      string          `json:"error,omitempty"`
}

// RolloutTarget is one cluster's progress with the change.
type RolloutTarget struct {
	Cluster string `json:"cluster"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

// Waves is an application's progressive rollout.
type Waves struct {
	Application string     `json:"application"`
	Revision    string     `json:"revision"`
	Released    int        `json:"released"`
	Total       int        `json:"total"`
	Paused      bool       `json:"paused,omitempty"`
	Blocked     string     `json:"blocked,omitempty"`
	Waves       []WaveRows `json:"waves"`
}

// WaveRows is one wave's clusters.
type WaveRows struct {
	Name     string          `json:"name"`
	Released bool            `json:"released"`
	Clusters []RolloutTarget `json:"clusters"`
}

// Job is one Volcano job on one cluster.
type Job struct {
	Cluster   string `json:"cluster"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	PodGroup  string `json:"podGroup,omitempty"`
	Pods      string `json:"pods"`
	Preflight string `json:"preflight,omitempty"`
	Started   string `json:"started,omitempty"`
	Finished  string `json:"finished,omitempty"`
	Message   string `json:"message,omitempty"`
}

// maxText bounds a message on the page, as the writer bounds it in Git.
const maxText = status.MaxMessageLength

// clean is the last redaction before a message reaches the page.
func clean(s string) string {
	s = redact.Text(s)
	if len(s) > maxText {
		s = strings.ToValidUTF8(s[:maxText], "") + " …"
	}
	return s
}

func cleanAll(in []string) []string {
	var out []string
	for _, s := range in {
		out = append(out, clean(s))
	}
	return out
}

// NewModel builds the page's model from a snapshot, the waves of
// progressive rollouts (nil when there are none) and a commit linker.
func NewModel(s *fleetview.Snapshot, waves []*rollout.Progress, link CommitLinker) *Model {
	v := s.View
	m := &Model{Repo: v.Repo, Branch: v.Branch, Head: revision(v.Revision, link), Time: v.Time.Time, Warnings: cleanAll(v.Warnings), Jobs: []Job{}}
	for _, st := range fleetview.AllStates {
		m.States = append(m.States, string(st))
		if n := v.Summary[st]; n > 0 {
			m.Summary = append(m.Summary, StateCount{State: string(st), Count: n})
		}
	}
	docs := map[string]*status.ClusterStatus{}
	if s.Documents != nil {
		for _, cd := range s.Documents.Clusters {
			docs[cd.Cluster] = cd.Document
		}
	}
	fleets := map[string]bool{}
	for _, cv := range v.Clusters {
		for _, f := range cv.Fleets {
			fleets[f] = true
		}
		c := cluster(cv, docs[cv.Name], s.Labels[cv.Name], link)
		if c.Quiet {
			if m.QuietUnits == nil {
				m.QuietUnits = map[string][][]any{}
			}
			m.QuietUnits[c.Name] = quietUnits(c)
		}
		m.Clusters = append(m.Clusters, c)
	}
	for f := range fleets {
		m.Fleets = append(m.Fleets, f)
	}
	sort.Strings(m.Fleets)
	if s.Documents != nil {
		for _, j := range fleetview.NewJobsView(s.Documents, v.Time.Time).Jobs {
			m.Jobs = append(m.Jobs, job(j, v.Time.Time))
		}
	}
	m.Rollout = rolloutOf(s, link)
	m.progress = waves
	for _, p := range waves {
		m.Waves = append(m.Waves, wavesOf(p))
	}
	return m
}

func revision(rev string, link CommitLinker) Revision {
	if rev == "" {
		return Revision{}
	}
	// The hash alone, abbreviated as git does; the branch is the page's.
	h := status.RevisionHash(rev)
	r := Revision{Full: rev, Short: h[:min(12, len(h))]}
	if link != nil && h != "" {
		r.URL = link(h)
	}
	return r
}

func cluster(cv fleetview.ClusterView, doc *status.ClusterStatus, labels map[string]string, link CommitLinker) Cluster {
	c := Cluster{
		Name: cv.Name, State: string(cv.State), Reason: clean(cv.Reason), Fleets: cv.Fleets,
		Applied: revision(cv.AppliedRevision, link), Desired: revision(cv.DesiredRevision, link),
		UnitsReady: cv.UnitsReady, UnitsTotal: cv.UnitsTotal,
		UnreachableAfter: age(cv.UnreachableAfter.Duration),
		AgentVersion:     cv.AgentVersion, Kubernetes: cv.KubernetesVersion,
		Warnings: cleanAll(cv.Warnings),
	}
	for k, v := range labels {
		c.Labels = append(c.Labels, k+"="+v)
	}
	sort.Strings(c.Labels)
	if cv.Heartbeat != nil {
		c.Heartbeat = cv.Heartbeat.UTC().Format(time.RFC3339)
	}
	if cv.HeartbeatAge != nil {
		c.HeartbeatAge = age(cv.HeartbeatAge.Duration)
	}
	if cv.Progress != nil {
		c.Progress = cv.Progress.String()
	}
	c.Jobs = jobCounts(cv.Jobs)
	if doc == nil {
		return c
	}
	c.LastError = clean(doc.LastError)
	c.Quiet = len(doc.Units) > 0
	for _, u := range doc.Units {
		un := unit(u, link)
		c.Units = append(c.Units, un)
		c.DriftCorrections += un.DriftCorrections
		c.Quiet = c.Quiet && un.Health == "Ready" && un.LastError == ""
	}
	return c
}

func unit(u status.UnitStatus, link CommitLinker) Unit {
	out := Unit{Name: u.Name, Revision: revision(u.AppliedRevision, link), Objects: u.Objects,
		DriftCorrections: u.DriftCorrections, LastError: clean(u.LastError), Waiting: clean(status.UnitWaiting(u))}
	switch {
	case status.UnitFailing(u):
		// UnitFailure's message is the condition's, or the unit's error.
		reason, msg := status.UnitFailure(u)
		out.Health, out.HealthReason, out.LastError = "Failing", reason, clean(msg)
	case status.UnitReady(u):
		out.Health = "Ready"
	default:
		out.Health = "NotReady"
		if c := meta.FindStatusCondition(u.Conditions, status.ConditionReady); c != nil {
			out.HealthReason = clean(joinReason(c.Reason, c.Message))
		}
	}
	return out
}

func joinReason(reason, msg string) string {
	if msg == "" {
		return reason
	}
	return reason + ": " + msg
}

func jobCounts(j fleetview.JobCounts) string {
	if j.Total == 0 {
		return ""
	}
	phases := make([]string, 0, len(j.ByPhase))
	for p, n := range j.ByPhase {
		phases = append(phases, fmt.Sprintf("%d %s", n, p))
	}
	sort.Strings(phases)
	return strings.Join(phases, ", ")
}

func job(j fleetview.JobRow, now time.Time) Job {
	out := Job{Cluster: j.Cluster, Name: j.Namespace + "/" + j.Name, Phase: j.Phase, PodGroup: j.PodGroupPhase,
		Pods:      fmt.Sprintf("%d running, %d succeeded, %d failed", j.Running, j.Succeeded, j.Failed),
		Preflight: j.Preflight, Message: clean(j.Message)}
	if out.Phase == "" {
		out.Phase = "Unknown"
	}
	if j.StartTime != nil {
		out.Started = age(now.Sub(j.StartTime.Time)) + " ago"
	}
	if j.CompletionTime != nil {
		out.Finished = age(now.Sub(j.CompletionTime.Time)) + " ago"
	}
	return out
}

func rolloutOf(s *fleetview.Snapshot, link CommitLinker) *Rollout {
	if s.Rollout == nil {
		if s.RolloutError == "" {
			return nil
		}
		return &Rollout{Error: clean(s.RolloutError)}
	}
	r := s.Rollout
	out := &Rollout{Commit: revision(r.Commit, link), Subject: clean(r.Subject), Author: r.Author, State: string(r.State)}
	for _, st := range fleetview.AllRolloutStates {
		if n := r.Summary[st]; n > 0 {
			out.Summary = append(out.Summary, StateCount{State: string(st), Count: n})
		}
	}
	for _, c := range r.Clusters {
		if c.State == fleetview.RolloutUnaffected {
			out.Unaffected++
			continue
		}
		reason := c.Reason
		if c.Note != "" {
			reason += " (" + c.Note + ")"
		}
		out.Clusters = append(out.Clusters, RolloutTarget{Cluster: c.Name, State: string(c.State), Reason: clean(reason)})
	}
	return out
}

func wavesOf(p *rollout.Progress) Waves {
	w := Waves{Application: p.Application, Revision: p.Revision, Released: p.Released, Total: len(p.Waves), Paused: p.Paused, Blocked: clean(p.Blocked)}
	for _, wv := range p.Waves {
		rows := WaveRows{Name: wv.Name, Released: wv.Released}
		for _, c := range wv.Clusters {
			rows.Clusters = append(rows.Clusters, RolloutTarget{Cluster: c.Cluster, State: string(c.Phase), Reason: clean(c.Reason)})
		}
		w.Waves = append(w.Waves, rows)
	}
	return w
}

// age prints a duration the way kubectl prints ages (2m5s, 3h, 4d).
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

func quietUnits(c Cluster) [][]any {
	out := make([][]any, 0, len(c.Units))
	for _, u := range c.Units {
		rev, url := u.Revision.Short, u.Revision.URL
		if u.Revision.Full == c.Applied.Full {
			rev, url = "", ""
		}
		out = append(out, []any{u.Name, rev, url, u.Objects, u.DriftCorrections})
	}
	return out
}
