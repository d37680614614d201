package fleetview

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// RolloutState is how far a merged change got on one cluster.
type RolloutState string

// Rollout states, in order. A change is Accepted once its commit is on the
// branch (a commit that is not is refused with ErrNotMerged); per cluster
// it is then Dispatched when the commit changed the cluster's slice,
// Propagating once the agent has fetched it (or a later commit),
// and Completed (applied at it or later, every unit Ready) or Failed (a
// unit failed at it or later). A cluster whose slice the commit did not
// change is Unaffected.
const (
	RolloutAccepted    RolloutState = "Accepted"
	RolloutUnaffected  RolloutState = "Unaffected"
	RolloutDispatched  RolloutState = "Dispatched"
	RolloutPropagating RolloutState = "Propagating"
	RolloutCompleted   RolloutState = "Completed"
	RolloutFailed      RolloutState = "Failed"
)

// AllRolloutStates in display order.
var AllRolloutStates = []RolloutState{RolloutDispatched, RolloutPropagating, RolloutCompleted, RolloutFailed, RolloutUnaffected}

// ErrNotMerged: the revision is not on the fleet repo's branch.
var ErrNotMerged = errors.New("revision is not on the branch")

// RolloutView is `flotilla status rollout`.
type RolloutView struct {
	Repo     string `json:"repo"`
	Branch   string `json:"branch"`
	Revision string `json:"revision"` // the branch head
	// Commit is the change followed; Subject, Author and CommitTime
	// describe it. Behind is how many commits the branch has on top of it.
	Commit     string      `json:"commit"`
	Subject    string      `json:"subject"`
	Author     string      `json:"author"`
	CommitTime metav1.Time `json:"commitTime"`
	Behind     int         `json:"behind"`
	// State is the change's overall state: Accepted until every
	// dispatched cluster completed (Completed), or Failed when one failed.
	State    RolloutState         `json:"state"`
	Time     metav1.Time          `json:"time"`
	Summary  map[RolloutState]int `json:"summary"`
	Clusters []ClusterRollout     `json:"clusters"`
	Warnings []string             `json:"warnings,omitempty"`
	// Waves are the progressive rollouts of the repo's applications, as
	// `flotilla rollout status` evaluates them; set by the caller when the
	// repo is a local clone (their state lives in its working tree), so
	// JSON and YAML carry what the table shows.
	Waves []*rollout.Progress `json:"waves,omitempty"`
}

// ClusterRollout is one cluster's progress with the change.
type ClusterRollout struct {
	Name   string       `json:"name"`
	Fleets []string     `json:"fleets,omitempty"`
	State  RolloutState `json:"state"`
	// Reason explains the state; Note adds what may make it stale
	// (Unreachable, untrusted or missing status).
	Reason          string        `json:"reason,omitempty"`
	Note            string        `json:"note,omitempty"`
	DesiredRevision string        `json:"desiredRevision,omitempty"`
	AppliedRevision string        `json:"appliedRevision,omitempty"`
	FailingUnits    []UnitFailure `json:"failingUnits,omitempty"`
	Heartbeat       *metav1.Time  `json:"heartbeat,omitempty"`
}

// ReadRollout follows the change rev (any revision of a local repo, a full
// hash for a remote one; the branch head when empty) across the fleet. It
// reads Git only and changes nothing, so it can be run again at any time.
func ReadRollout(ctx context.Context, o ReadOptions, rev string) (*RolloutView, error) {
	d, err := load(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer d.main.close()
	return rolloutFrom(ctx, d, &o, rev)
}

func rolloutFrom(ctx context.Context, d *fleetData, o *ReadOptions, rev string) (*RolloutView, error) {
	m := d.main
	commit, err := m.resolve(ctx, rev, o.branch())
	if err != nil {
		return nil, err
	}
	later, err := m.between(ctx, commit)
	if errors.Is(err, gitrepo.ErrNotAncestor) {
		return nil, fmt.Errorf("%w: %s is not in the history of %s", ErrNotMerged, commit, m.revision)
	}
	if err != nil {
		return nil, err
	}
	reached := map[string]bool{commit: true}
	for _, c := range later {
		reached[c.Hash] = true
	}
	info, err := gitrepo.ReadCommit(m.repoDir, commit)
	if err != nil {
		return nil, err
	}
	var changed []string
	allTouched := len(info.Parents) == 0 // a root commit creates every slice
	if !allTouched {
		if changed, err = m.changed(ctx, info.Parents[0], commit); err != nil {
			return nil, fmt.Errorf("files changed by %s: %w", shortHash(commit), err)
		}
	}
	now := o.now().UTC().Truncate(time.Second)
	v := &RolloutView{
		Repo: redact.URL(o.Repo), Branch: o.branch(), Revision: m.revision,
		Commit: commit, Subject: firstLine(info.Message),
		Author:     fmt.Sprintf("%s <%s>", info.Author.Name, info.Author.Email),
		CommitTime: metav1.NewTime(info.Committer.When.UTC()),
		Behind:     len(later),
		Time:       metav1.NewTime(now),
		Summary:    map[RolloutState]int{},
		Warnings:   d.warnings,
	}
	diffs := &sliceDiffs{main: m, cache: map[string]diffResult{}}
	dispatched, done, failed := 0, 0, 0
	for _, c := range d.clusters {
		cv := clusterView(ctx, d, c, now, diffs)
		cr := ClusterRollout{Name: cv.Name, Fleets: cv.Fleets}
		if allTouched || touches(changed, slice.ClusterDir(cv.Name)) {
			rolloutOf(&cr, d.refs[cv.Name], cv, reached)
			dispatched++
			switch cr.State {
			case RolloutCompleted:
				done++
			case RolloutFailed:
				failed++
			}
		} else {
			cr.State, cr.Reason = RolloutUnaffected, "the commit did not change this cluster's slice"
		}
		v.Summary[cr.State]++
		v.Clusters = append(v.Clusters, cr)
	}
	switch {
	case failed > 0:
		v.State = RolloutFailed
	case done == dispatched:
		v.State = RolloutCompleted
	default:
		v.State = RolloutAccepted
	}
	return v, nil
}

func rolloutOf(cr *ClusterRollout, sr *statusRef, cv ClusterView, reached map[string]bool) {
	cr.State, cr.Reason = RolloutDispatched, "the commit changed this cluster's slice; the agent has not fetched it yet"
	switch cv.State {
	case StateNoStatus:
		cr.Note = "no status from this cluster's agent"
		return
	case StateUntrusted:
		cr.Note = "untrusted status: " + cv.Reason
		return
	case StateUnreachable:
		cr.Note = cv.Reason
	}
	doc := sr.doc
	cr.DesiredRevision, cr.AppliedRevision, cr.Heartbeat = doc.DesiredRevision, doc.AppliedRevision, cv.Heartbeat
	fetched := reached[status.RevisionHash(doc.DesiredRevision)] || reached[status.RevisionHash(doc.FetchedRevision)]
	applied := reached[status.RevisionHash(doc.AppliedRevision)]
	if !fetched && !applied {
		return
	}
	failReason, failMsg := status.ClusterFailure(doc)
	switch {
	case failReason != "" || len(cv.FailingUnits) > 0:
		cr.State, cr.FailingUnits = RolloutFailed, cv.FailingUnits
		if failReason != "" {
			cr.Reason = failReason + ": " + failMsg
		} else {
			cr.Reason = cv.Reason
		}
	case applied && cv.UnitsReady == cv.UnitsTotal:
		cr.State, cr.Reason = RolloutCompleted, fmt.Sprintf("applied %s, %d/%d units ready", status.ShortRevision(doc.AppliedRevision), cv.UnitsReady, cv.UnitsTotal)
	default:
		cr.State = RolloutPropagating
		cr.Reason = fmt.Sprintf("fetched %s; %d/%d units ready", status.ShortRevision(doc.DesiredRevision), cv.UnitsReady, cv.UnitsTotal)
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
