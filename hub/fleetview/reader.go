package fleetview

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// State is a cluster's state in the fleet view.
type State string

// States, from the most to the least urgent (a cluster shows the first
// that applies).
const (
	// StateUntrusted: its status ref cannot be believed (Trust.Reason).
	StateUntrusted State = "Untrusted"
	// StateNoStatus: its agent never reported.
	StateNoStatus State = "NoStatus"
	// StateConflict: the head document is from another cluster instance
	// (instanceID) than the commit before it, which was still alive: two
	// agents are configured with the same cluster name. A re-install,
	// whose old instance went quiet first, is not a conflict.
	StateConflict State = "Conflict"
	// StateClockSkew: the heartbeat (or the status commit) is ahead of the
	// reader's clock by more than ReadOptions.ClockSkewTolerance; its age,
	// and so Unreachable, cannot be judged (ClusterView.ClockSkew).
	StateClockSkew State = "ClockSkew"
	// StateUnreachable: the last heartbeat is older than the cluster's
	// threshold; the rest of the row is what it last said.
	StateUnreachable State = "Unreachable"
	// StateFailing: a unit (or the loop) failed; see FailingUnits.
	StateFailing State = "Failing"
	// StatePruneHeld: the agent did not prune units that left its slice
	// because they were too many; it waits for `flotilla cluster
	// decommission` (or for the units to come back).
	StatePruneHeld State = "PruneHeld"
	// StateBehind: not yet applied at the branch head (or not all Ready).
	StateBehind State = "Behind"
	// StateInSync: applied at the head, or at an older commit after which
	// nothing changed in this cluster's slice, and every unit Ready.
	StateInSync State = "InSync"
)

// AllStates in display order.
var AllStates = []State{StateInSync, StateBehind, StatePruneHeld, StateFailing, StateUnreachable, StateClockSkew, StateConflict, StateNoStatus, StateUntrusted}

// DefaultClockSkewTolerance is how far ahead of the reader's clock a
// heartbeat may be before the cluster shows ClockSkew: NTP-synced clocks
// are well within it.
const DefaultClockSkewTolerance = 2 * time.Minute

// Health check defaults, for clusters whose fleets set none: the agent's
// default heartbeat interval, three missed heartbeats.
const (
	DefaultHealthCheckInterval = status.DefaultHeartbeatInterval
	DefaultFailureThreshold    = 3
)

// View is the fleet as Git shows it: `flotilla status`.
type View struct {
	Repo     string `json:"repo"`
	Branch   string `json:"branch"`
	Revision string `json:"revision"`
	// Time is when the view was read; ages are relative to it.
	Time     metav1.Time   `json:"time"`
	Summary  map[State]int `json:"summary"`
	Clusters []ClusterView `json:"clusters"`
	// Strays are status refs that belong to no cluster of clusters/.
	Strays   []StrayRef `json:"strays,omitempty"`
	Warnings []string   `json:"warnings,omitempty"`
}

// ClusterView is one cluster's row.
type ClusterView struct {
	Name   string   `json:"name"`
	Fleets []string `json:"fleets,omitempty"`
	State  State    `json:"state"`
	// Reason explains the state in a few words.
	Reason          string        `json:"reason,omitempty"`
	DesiredRevision string        `json:"desiredRevision,omitempty"`
	AppliedRevision string        `json:"appliedRevision,omitempty"`
	UnitsReady      int           `json:"unitsReady"`
	UnitsTotal      int           `json:"unitsTotal"`
	FailingUnits    []UnitFailure `json:"failingUnits,omitempty"`
	// WaitingUnits are the units the agent is waiting for (health, a
	// hook), with what they wait for.
	WaitingUnits []UnitWaiting `json:"waitingUnits,omitempty"`
	Jobs         JobCounts     `json:"jobs"`
	Heartbeat    *metav1.Time  `json:"heartbeat,omitempty"`
	// HeartbeatAge is Time minus Heartbeat (0 when the heartbeat is ahead).
	HeartbeatAge *metav1.Duration `json:"heartbeatAge,omitempty"`
	// ClockSkew is how far the heartbeat or status commit is ahead of Time,
	// when more than the tolerance (State ClockSkew).
	ClockSkew *metav1.Duration `json:"clockSkew,omitempty"`
	// InstanceID is the cluster instance the document comes from.
	InstanceID string `json:"instanceID,omitempty"`
	// UnreachableAfter is the strictest interval × failureThreshold of the
	// cluster's fleets (DefaultHealthCheckInterval × DefaultFailureThreshold
	// when none sets a healthCheck).
	UnreachableAfter  metav1.Duration `json:"unreachableAfter"`
	KubernetesVersion string          `json:"kubernetesVersion,omitempty"`
	AgentVersion      string          `json:"agentVersion,omitempty"`
	StatusRef         string          `json:"statusRef,omitempty"`
	StatusCommit      string          `json:"statusCommit,omitempty"`
	Trust             *Trust          `json:"trust,omitempty"`
	Warnings          []string        `json:"warnings,omitempty"`
	// Progress is what the agent's running cycle was doing at its last
	// heartbeat; nil when the document is a cycle's result.
	Progress *status.Progress `json:"progress,omitempty"`
	// SuspendedUnits are the units the agent leaves as they are because
	// the fleet repo suspends them.
	SuspendedUnits []string `json:"suspendedUnits,omitempty"`
}

// UnitFailure is a failing unit and why.
type UnitFailure struct {
	Unit    string `json:"unit"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// UnitWaiting is a unit the agent waits for, and what for ("waiting for
// Deployment/ns/web: InProgress: ...").
type UnitWaiting struct {
	Unit    string `json:"unit"`
	Message string `json:"message"`
}

// JobCounts summarises a cluster's Volcano jobs.
type JobCounts struct {
	Total   int            `json:"total"`
	ByPhase map[string]int `json:"byPhase,omitempty"`
}

// StrayRef is a status ref naming no known cluster.
type StrayRef struct {
	Ref    string `json:"ref"`
	Repo   string `json:"repo"`
	Commit string `json:"commit"`
	Reason string `json:"reason"`
}

// fleetData is what Read and ReadRollout both start from.
type fleetData struct {
	main     *mainBranch
	clusters []*fleet.Cluster
	refs     map[string]*statusRef
	strays   []StrayRef
	warnings []string
	// skewTolerance is ReadOptions.ClockSkewTolerance, defaulted.
	skewTolerance time.Duration
}

func load(ctx context.Context, o *ReadOptions) (*fleetData, error) {
	if o.Repo == "" {
		return nil, fmt.Errorf("status: the fleet repo is not set")
	}
	m, err := openMain(ctx, o)
	if err != nil {
		return nil, err
	}
	refs, err := readStatusRefs(ctx, o)
	if err != nil {
		m.close()
		return nil, err
	}
	d := &fleetData{main: m, refs: map[string]*statusRef{}, warnings: append([]string(nil), m.warnings...), skewTolerance: o.ClockSkewTolerance}
	if d.skewTolerance <= 0 {
		d.skewTolerance = DefaultClockSkewTolerance
	}
	if len(o.Clusters) > 0 {
		for _, name := range o.Clusters {
			c := m.fleet.Cluster(name)
			if c == nil {
				m.close()
				return nil, fmt.Errorf("status: no cluster %q in clusters/ at %s", name, status.ShortRevision(m.revision))
			}
			d.clusters = append(d.clusters, c)
		}
		sort.Slice(d.clusters, func(i, j int) bool { return d.clusters[i].Metadata.Name < d.clusters[j].Metadata.Name })
	} else {
		d.clusters = m.fleet.Clusters
	}
	// Judging is mostly decoding YAML: spread it over the CPUs.
	keyRings := statusKeyRings(m.fleet.Clusters)
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				judge(&refs[i], m.fleet.Cluster(refs[i].cluster), keyRings)
			}
		}()
	}
	for i := range refs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i := range refs {
		sr := &refs[i]
		c := m.fleet.Cluster(sr.cluster)
		if c == nil {
			d.strays = append(d.strays, StrayRef{Ref: sr.ref.Ref, Repo: sr.repo, Commit: sr.ref.Hash, Reason: sr.trust.Reason})
			continue
		}
		if prev, ok := d.refs[sr.cluster]; ok {
			// The same cluster in two status repos (e.g. after resharding):
			// the fresher trusted document wins.
			d.warnings = append(d.warnings, fmt.Sprintf("cluster %s has status refs in %s and %s", sr.cluster, prev.repo, sr.repo))
			if !fresher(sr, prev) {
				continue
			}
		}
		d.refs[sr.cluster] = sr
	}
	return d, nil
}

func fresher(a, b *statusRef) bool {
	if (a.doc != nil) != (b.doc != nil) {
		return a.doc != nil
	}
	if a.doc != nil {
		return a.doc.Heartbeat.After(b.doc.Heartbeat.Time)
	}
	return a.ref.Committer.When.After(b.ref.Committer.When)
}

// Read builds the fleet view: every cluster of clusters/ on the branch
// head, with what its status ref says, judged (see Trust) and compared
// with the head.
func Read(ctx context.Context, o ReadOptions) (*View, error) {
	d, err := load(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer d.main.close()
	return viewOf(ctx, d, &o), nil
}

func viewOf(ctx context.Context, d *fleetData, o *ReadOptions) *View {
	now := o.now().UTC().Truncate(time.Second)
	v := &View{
		Repo:     redact.URL(o.Repo),
		Branch:   o.branch(),
		Revision: d.main.revision,
		Time:     metav1.NewTime(now),
		Summary:  map[State]int{},
		Strays:   d.strays,
		Warnings: d.warnings,
	}
	diffs := &sliceDiffs{main: d.main, cache: map[string]diffResult{}}
	for _, c := range d.clusters {
		cv := clusterView(ctx, d, c, now, diffs)
		v.Summary[cv.State]++
		v.Clusters = append(v.Clusters, cv)
	}
	return v
}

// sliceDiffs answers "did this cluster's slice change between commit X
// and the head?", one tree diff per distinct X.
type sliceDiffs struct {
	main  *mainBranch
	cache map[string]diffResult
}

type diffResult struct {
	paths []string // sorted
	err   error
}

func (s *sliceDiffs) sliceChanged(ctx context.Context, cluster, from string) (bool, error) {
	if from == s.main.head {
		return false, nil
	}
	r, ok := s.cache[from]
	if !ok {
		r.paths, r.err = s.main.changed(ctx, from, s.main.head)
		s.cache[from] = r
	}
	if r.err != nil {
		return true, r.err
	}
	return touches(r.paths, slice.ClusterDir(cluster)), nil
}

// touches reports whether sorted paths has one under dir.
func touches(paths []string, dir string) bool {
	prefix := dir + "/"
	i := sort.SearchStrings(paths, prefix)
	return i < len(paths) && strings.HasPrefix(paths[i], prefix)
}

func clusterView(ctx context.Context, d *fleetData, c *fleet.Cluster, now time.Time, diffs *sliceDiffs) ClusterView {
	name := c.Metadata.Name
	cv := ClusterView{Name: name}
	var strictest time.Duration
	for _, f := range d.main.fleet.FleetsOf(c) {
		cv.Fleets = append(cv.Fleets, f.Metadata.Name)
		if t := threshold(f.Spec.HealthCheck); strictest == 0 || t < strictest {
			strictest = t
		}
	}
	if strictest == 0 {
		strictest = threshold(nil)
	}
	cv.UnreachableAfter = metav1.Duration{Duration: strictest}

	sr := d.refs[name]
	if sr == nil {
		cv.State, cv.Reason = StateNoStatus, "the agent has not reported"
		return cv
	}
	cv.StatusRef, cv.StatusCommit = sr.ref.Ref, sr.ref.Hash
	trust := sr.trust
	cv.Trust = &trust
	if sr.doc == nil {
		cv.State, cv.Reason = StateUntrusted, sr.trust.Reason
		return cv
	}
	doc := sr.doc
	cv.DesiredRevision, cv.AppliedRevision = doc.DesiredRevision, doc.AppliedRevision
	cv.KubernetesVersion, cv.AgentVersion = doc.KubernetesVersion, doc.Agent.Version
	cv.InstanceID = doc.InstanceID
	cv.Progress = doc.Progress
	hb := doc.Heartbeat
	cv.Heartbeat = &hb
	age := now.Sub(hb.Time)
	if age < 0 {
		age = 0
	}
	cv.HeartbeatAge = &metav1.Duration{Duration: age}
	// The writer commits at the heartbeat's time, so the later of the two
	// is how far the agent's clock is ahead; a gap between them means the
	// commit was not made the way the writer makes it.
	committed := sr.ref.Committer.When
	ahead := max(hb.Sub(now), committed.Sub(now))
	if ahead > d.skewTolerance {
		cv.ClockSkew = &metav1.Duration{Duration: ahead.Round(time.Second)}
	}
	if gap := hb.Sub(committed).Abs(); !committed.IsZero() && gap > d.skewTolerance {
		cv.Warnings = append(cv.Warnings, fmt.Sprintf("the status commit's time and the document's heartbeat differ by %s", gap.Round(time.Second)))
	}
	conflict := instanceConflict(sr, doc, strictest)
	if hi := doc.HeartbeatInterval; hi != nil && hi.Duration > strictest {
		cv.Warnings = append(cv.Warnings, fmt.Sprintf("the agent's heartbeat interval %s is longer than the %s after which the cluster counts as unreachable; set the agent's --heartbeat-interval to the fleet's healthCheck.interval or less", hi.Duration, strictest))
	}
	for _, u := range doc.Units {
		cv.UnitsTotal++
		if status.UnitReady(u) {
			cv.UnitsReady++
		}
		if status.UnitFailing(u) {
			reason, msg := status.UnitFailure(u)
			cv.FailingUnits = append(cv.FailingUnits, UnitFailure{Unit: u.Name, Reason: reason, Message: msg})
		} else if w := status.UnitWaiting(u); w != "" {
			cv.WaitingUnits = append(cv.WaitingUnits, UnitWaiting{Unit: u.Name, Message: w})
		}
		if u.Suspended {
			cv.SuspendedUnits = append(cv.SuspendedUnits, u.Name)
		}
	}
	for _, j := range doc.Jobs {
		cv.Jobs.Total++
		if cv.Jobs.ByPhase == nil {
			cv.Jobs.ByPhase = map[string]int{}
		}
		phase := j.Phase
		if phase == "" {
			phase = "Unknown"
		}
		cv.Jobs.ByPhase[phase]++
	}

	loopReason, loopMsg := status.ClusterFailure(doc)
	switch {
	case conflict != "":
		cv.State, cv.Reason = StateConflict, conflict
	case cv.ClockSkew != nil:
		cv.State = StateClockSkew
		cv.Reason = fmt.Sprintf("heartbeat %s ahead of this clock (tolerance %s): the cluster's clock is wrong, its age cannot be judged", cv.ClockSkew.Duration, d.skewTolerance)
	case age > strictest:
		cv.State = StateUnreachable
		cv.Reason = fmt.Sprintf("no heartbeat for %s (threshold %s)", age.Round(time.Second), strictest)
	case loopReason != "":
		cv.State, cv.Reason = StateFailing, loopReason+": "+loopMsg
	case len(cv.FailingUnits) > 0:
		f := cv.FailingUnits[0]
		cv.State, cv.Reason = StateFailing, fmt.Sprintf("%s: %s", f.Unit, f.Reason)
		if len(cv.FailingUnits) > 1 {
			cv.Reason += fmt.Sprintf(" (and %d more)", len(cv.FailingUnits)-1)
		}
	case status.PruneHeld(doc) != "":
		cv.State, cv.Reason = StatePruneHeld, status.PruneHeld(doc)
	default:
		cv.State, cv.Reason = inSync(ctx, d, name, doc, cv, diffs)
	}
	// A suspended unit explains an InSync cluster's reason, and a Behind
	// one's too: a change to a suspended unit alone moves no hash the
	// agent reports, so its status is committed with the next heartbeat.
	if len(cv.SuspendedUnits) > 0 && (cv.State == StateInSync || cv.State == StateBehind) {
		reason := status.ReasonSuspended + ": " + strings.Join(cv.SuspendedUnits, ", ")
		if cv.Reason != "" {
			reason += "; " + cv.Reason
		}
		cv.Reason = reason
	}
	return cv
}

// instanceConflict says why the head document's instance replacing the
// previous commit's is a conflict, or "" when it is not: no instance on
// either side, the same one, or a previous instance that had gone quiet
// for longer than threshold (a re-install taking over).
func instanceConflict(sr *statusRef, doc *status.ClusterStatus, threshold time.Duration) string {
	if doc.InstanceID == "" || !sr.ref.ParentFileFound {
		return ""
	}
	prev, err := status.Decode(sr.ref.ParentFile)
	if err != nil || prev.InstanceID == "" || prev.InstanceID == doc.InstanceID {
		return ""
	}
	if doc.Heartbeat.Sub(prev.Heartbeat.Time) > threshold {
		return ""
	}
	return fmt.Sprintf("instance %s overwrote the status of instance %s, which was alive: two agents may be configured with the same cluster name",
		doc.InstanceID, prev.InstanceID)
}

// inSync tells InSync from Behind for a cluster that is not failing.
func inSync(ctx context.Context, d *fleetData, name string, doc *status.ClusterStatus, cv ClusterView, diffs *sliceDiffs) (State, string) {
	applied := status.RevisionHash(doc.AppliedRevision)
	if applied == "" {
		return StateBehind, "not fully applied yet"
	}
	changed, err := diffs.sliceChanged(ctx, name, applied)
	if err != nil {
		return StateBehind, fmt.Sprintf("applied %s, which cannot be compared with %s: %v", status.ShortRevision(doc.AppliedRevision), status.ShortRevision(d.main.revision), err)
	}
	if changed {
		return StateBehind, fmt.Sprintf("applied %s; its slice changed since", status.ShortRevision(doc.AppliedRevision))
	}
	if cv.UnitsReady < cv.UnitsTotal {
		return StateBehind, fmt.Sprintf("%d of %s not ready", cv.UnitsTotal-cv.UnitsReady, plural.Count(cv.UnitsTotal, "unit", "units"))
	}
	return StateInSync, ""
}

// threshold is a healthCheck's interval × failureThreshold, with defaults.
func threshold(hc *fleet.HealthCheck) time.Duration {
	interval, n := DefaultHealthCheckInterval, int32(DefaultFailureThreshold)
	if hc != nil {
		if hc.Interval.Duration > 0 {
			interval = hc.Interval.Duration
		}
		if hc.FailureThreshold > 0 {
			n = hc.FailureThreshold
		}
	}
	return interval * time.Duration(n)
}
