package notify

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Event is one thing that happened in the fleet, sent to webhooks. Its
// JSON is the generic providers' body: Flux's event shape, so a receiver
// written for Flux's generic webhook reads it.
type Event struct {
	InvolvedObject ObjectRef         `json:"involvedObject"`
	Severity       string            `json:"severity"`
	Timestamp      time.Time         `json:"timestamp"`
	Message        string            `json:"message"`
	Reason         string            `json:"reason"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Controller     string            `json:"reportingController"`

	// For alerts' filters; not sent.
	cluster, application string
	fleets               []string
}

// ObjectRef is what an event is about.
type ObjectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// reportingController names the sender in every event.
const reportingController = "flotilla-notify"

// clusterOK is the fact of a cluster in none of the states events tell.
const clusterOK = "ok"

// Fact is a subject's state as events tell it: a cluster's health, a
// rollout's state, the revision a wave has. A provider is told when a
// fact's value differs from the one it was last told (the record keeps
// those), so each change is told once.
type Fact struct {
	Subject string `json:"subject"`
	Value   string `json:"value"`
	// Event tells the change to Value; nil: recorded, never told.
	Event *Event `json:"event,omitempty"`
	// Quiet facts are only recorded on a provider's first run, which
	// tells what is wrong now but not what went well before it.
	Quiet bool `json:"-"`
	// AfterChange facts are told only when the subject was seen before
	// with another value (a recovery needs something to recover from).
	AfterChange bool `json:"-"`
}

// tells reports whether f, against what the provider was last told of its
// subject (prev, seen) and whether the provider has a record at all,
// makes an event.
func (f Fact) tells(prev string, seen, baseline bool) bool {
	switch {
	case f.Event == nil, seen && prev == f.Value:
		return false
	case f.AfterChange && !seen:
		return false
	case f.Quiet && baseline:
		return false
	}
	return true
}

// unhealthy are the cluster states events tell, with their severities.
var unhealthy = map[fleetview.State]bool{
	fleetview.StateFailing: true, fleetview.StateUnreachable: true, fleetview.StateUntrusted: true,
	fleetview.StateClockSkew: true, fleetview.StateConflict: true, fleetview.StatePruneHeld: true,
}

// Facts are the fleet's facts: each cluster's health from the fleet view
// and each rollout's state and released waves at revision (main's head).
func Facts(repo *fleet.Repo, view *fleetview.View, apps []AppState, revision, dashboardURL string, now time.Time) []Fact {
	meta := func(kv ...string) map[string]string {
		m := map[string]string{"revision": revision}
		if dashboardURL != "" {
			m["url"] = dashboardURL
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	var out []Fact
	for _, cv := range view.Clusters {
		fleets := fleetNames(repo, cv.Name)
		f := Fact{Subject: "cluster/" + cv.Name, Value: clusterOK}
		ev := &Event{InvolvedObject: ObjectRef{Kind: fleet.KindCluster, Name: cv.Name}, Timestamp: now, Controller: reportingController,
			cluster: cv.Name, fleets: fleets, Metadata: meta("fleets", strings.Join(fleets, ","))}
		if unhealthy[cv.State] {
			f.Value = string(cv.State)
			if decryptionFailed(cv) {
				f.Value = fleet.EventDecryptionFailed
			}
			ev.Reason, ev.Severity = f.Value, fleet.SeverityError
			ev.Message = fmt.Sprintf("cluster %s is %s", cv.Name, cv.State)
			if cv.Reason != "" {
				ev.Message += ": " + cv.Reason
			}
		} else {
			f.AfterChange = true
			ev.Reason, ev.Severity = fleet.EventRecovered, fleet.SeverityInfo
			ev.Message = fmt.Sprintf("cluster %s recovered: %s", cv.Name, cv.State)
		}
		f.Event = ev
		out = append(out, f)
	}
	for _, a := range apps {
		if a.Progress != nil {
			out = append(out, rolloutFacts(repo, a, meta, now)...)
		}
	}
	return out
}

func rolloutFacts(repo *fleet.Repo, a AppState, meta func(kv ...string) map[string]string, now time.Time) []Fact {
	p := a.Progress
	var fleets []string
	for _, c := range a.Clusters {
		fleets = append(fleets, fleetNames(repo, c.Cluster)...)
	}
	sort.Strings(fleets)
	fleets = slices.Compact(fleets)
	event := func(reason, severity, format string, args ...any) *Event {
		return &Event{InvolvedObject: ObjectRef{Kind: fleet.KindApplication, Name: a.Application}, Timestamp: now,
			Controller: reportingController, Reason: reason, Severity: severity, Message: fmt.Sprintf(format, args...),
			application: a.Application, fleets: fleets, Metadata: meta("rolloutRevision", p.Revision, "fleets", strings.Join(fleets, ","))}
	}
	var out []Fact
	for _, w := range p.Waves {
		if !w.Released {
			continue
		}
		clusters := make([]string, len(w.Clusters))
		for i, c := range w.Clusters {
			clusters[i] = c.Cluster
		}
		out = append(out, Fact{Subject: "rollout/" + a.Application + "/wave/" + w.Name, Value: p.Revision, Quiet: true,
			Event: event(fleet.EventWaveReleased, fleet.SeverityInfo, "%s: wave %s released to %s", a.Application, w.Name, strings.Join(clusters, ", "))})
	}
	f := Fact{Subject: "rollout/" + a.Application, Value: p.Revision + " " + string(p.State)}
	switch p.State {
	case rollout.ProgressFailed:
		f.Event = event(fleet.EventWaveHeld, fleet.SeverityError, "%s: rollout held at wave %s: %s", a.Application, nextWave(p), p.Blocked)
	case rollout.ProgressPaused:
		f.Event, f.Quiet = event(fleet.EventRolloutPaused, fleet.SeverityInfo, "%s: rollout paused at wave %s", a.Application, nextWave(p)), true
	case rollout.ProgressAborted:
		f.Event = event(fleet.EventRolloutAborted, fleet.SeverityError, "%s: rollout aborted: %s", a.Application, p.Blocked)
	case rollout.ProgressComplete:
		f.Event, f.Quiet = event(fleet.EventRolloutComplete, fleet.SeverityInfo, "%s: rollout complete on %d waves", a.Application, len(p.Waves)), true
	default:
		// Releasable, Baking, Waiting: progressing as planned. The value
		// still moves, so that a rollout held, resumed and held again is
		// told twice.
		f.Value = p.Revision + " progressing"
	}
	return append(out, f)
}

// nextWave is the first wave not released, the one a rollout holds.
func nextWave(p *rollout.Progress) string {
	for _, w := range p.Waves {
		if !w.Released {
			return w.Name
		}
	}
	return p.Waves[len(p.Waves)-1].Name
}

func decryptionFailed(cv fleetview.ClusterView) bool {
	for _, u := range cv.FailingUnits {
		if u.Reason == status.ReasonDecryptionFailed {
			return true
		}
	}
	return false
}

func fleetNames(repo *fleet.Repo, cluster string) []string {
	var out []string
	for _, f := range repo.FleetsOf(repo.Cluster(cluster)) {
		out = append(out, f.Metadata.Name)
	}
	return out
}

// Route is one provider and the alerts that send to it.
type Route struct {
	Provider *fleet.Provider
	Alerts   []*fleet.Alert
}

// Routes are the repo's providers that send, each with its alerts; a
// suspended provider or alert sends nothing.
func Routes(repo *fleet.Repo) []Route {
	var out []Route
	for _, p := range repo.Providers {
		if p.Spec.Suspend {
			continue
		}
		r := Route{Provider: p}
		for _, a := range repo.Alerts {
			if !a.Spec.Suspend && a.Spec.ProviderRef.Name == p.Metadata.Name {
				r.Alerts = append(r.Alerts, a)
			}
		}
		if len(r.Alerts) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// Wants reports whether any of the route's alerts takes e.
func (r Route) Wants(e *Event) bool {
	for _, a := range r.Alerts {
		if matches(a.Spec, e) {
			return true
		}
	}
	return false
}

func matches(s fleet.AlertSpec, e *Event) bool {
	if s.EventSeverity == fleet.SeverityError && e.Severity != fleet.SeverityError {
		return false
	}
	if len(s.EventReasons) > 0 && !slices.Contains(s.EventReasons, e.Reason) {
		return false
	}
	if len(s.EventSources) == 0 {
		return true
	}
	for _, src := range s.EventSources {
		var names []string
		switch src.Kind {
		case fleet.KindCluster:
			names = []string{e.cluster}
		case fleet.KindApplication:
			names = []string{e.application}
		case fleet.KindFleet:
			names = e.fleets
		}
		for _, n := range names {
			if n != "" && (src.Name == "*" || src.Name == n) {
				return true
			}
		}
	}
	return false
}
