package rollout

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Phase is where one cluster of a wave stands with the revision.
type Phase string

// Phases. Held: the cluster's wave is not released. Pending: released,
// but its agent has not reported the released unit yet (or reported
// nothing we can trust). Applied: reported, not Ready at the released
// content yet (or its agent does not say since when). Ready: Ready at the
// released content since Since. Failed: the unit failed (Reason).
const (
	PhaseHeld    Phase = "Held"
	PhasePending Phase = "Pending"
	PhaseApplied Phase = "Applied"
	PhaseReady   Phase = "Ready"
	PhaseFailed  Phase = "Failed"
)

// ProgressState is where a rollout stands as a whole: what advance would
// do, or what holds it.
type ProgressState string

// States of a rollout. Releasable: advance releases the next wave now.
// Baking: every cluster of the last released wave is Ready, not yet for
// bake. Waiting: a cluster of it is not Ready (Pending, Applied).
// Failed: more of its clusters Failed than maxFailures. Paused, Aborted,
// Complete: as the rollout's state says.
const (
	ProgressReleasable ProgressState = "Releasable"
	ProgressBaking     ProgressState = "Baking"
	ProgressWaiting    ProgressState = "Waiting"
	ProgressFailed     ProgressState = "Failed"
	ProgressPaused     ProgressState = "Paused"
	ProgressAborted    ProgressState = "Aborted"
	ProgressComplete   ProgressState = "Complete"
)

// States in display order.
var ProgressStates = []ProgressState{ProgressReleasable, ProgressBaking, ProgressWaiting, ProgressFailed, ProgressPaused, ProgressAborted, ProgressComplete}

// ClusterProgress is one cluster of a wave.
type ClusterProgress struct {
	Cluster string       `json:"cluster"`
	Phase   Phase        `json:"phase"`
	Since   *metav1.Time `json:"since,omitempty"`
	Reason  string       `json:"reason,omitempty"`
}

// WaveProgress is one wave of a rollout.
type WaveProgress struct {
	Name        string            `json:"name"`
	Released    bool              `json:"released"`
	MaxFailures int               `json:"maxFailures"`
	Clusters    []ClusterProgress `json:"clusters"`
}

// Progress is an application's rollout as the status refs show it, and
// what `rollout advance` would do.
type Progress struct {
	Application string          `json:"application"`
	Revision    string          `json:"revision"`
	Released    int             `json:"released"`
	Paused      bool            `json:"paused,omitempty"`
	Aborted     bool            `json:"aborted,omitempty"`
	Bake        metav1.Duration `json:"bake"`
	Waves       []WaveProgress  `json:"waves"`
	// Release is the released count advance writes: Released when
	// nothing can be released now (Blocked says why).
	Release int           `json:"release"`
	State   ProgressState `json:"state"`
	Blocked string        `json:"blocked,omitempty"`
	// Passed says why the next wave may go (when Release > Released after
	// a released wave): each cluster's measured time Ready at the revision
	// against bake.
	Passed string `json:"passed,omitempty"`
}

// Observe describes a cluster whose wave is released: want is the unit
// hash its committed slice gives it, doc its status (nil with note when
// it has none that can be trusted).
func Observe(cluster, unit, want string, doc *status.ClusterStatus, note string) ClusterProgress {
	cp := ClusterProgress{Cluster: cluster, Phase: PhasePending}
	if doc == nil {
		cp.Reason = note
		if cp.Reason == "" {
			cp.Reason = "no status reported"
		}
		return cp
	}
	var us *status.UnitStatus
	for i := range doc.Units {
		if doc.Units[i].Name == unit {
			us = &doc.Units[i]
		}
	}
	switch {
	case us == nil:
		cp.Reason = "the agent has not reported unit " + unit
	case us.Suspended:
		cp.Reason = "suspended on this cluster: the agent does not apply it"
	case us.Hash != want:
		cp.Reason = fmt.Sprintf("the agent reports %s, not the released %s", shortHash(us.Hash), shortHash(want))
	case status.UnitFailing(*us):
		reason, msg := status.UnitFailure(*us)
		cp.Phase, cp.Reason = PhaseFailed, strings.TrimSpace(reason+": "+msg)
	case status.UnitReady(*us) && !us.HasReadiness():
		// The Ready condition's transition time is no substitute: it
		// stays put when a Ready unit gets new content, so bake would
		// count from an older revision.
		cp.Phase, cp.Reason = PhaseApplied, "Ready, but its agent does not report since when at this content (status without readySince: upgrade the agent); bake cannot be measured"
	case status.UnitReady(*us) && us.ReadyHash == want && us.ReadySince != nil:
		cp.Phase = PhaseReady
		since := *us.ReadySince
		cp.Since = &since
	case status.UnitReady(*us):
		cp.Phase, cp.Reason = PhaseApplied, "applied, not reported Ready at the released content yet"
	default:
		cp.Phase, cp.Reason = PhaseApplied, "applied, not Ready yet"
	}
	return cp
}

func shortHash(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	return h[:min(12, len(h))]
}

// Evaluate lays out st's waves with each released cluster's progress
// (observe) and decides what may be released at now: the next wave, once
// every cluster of the last released wave has been Ready for bake with at
// most its maxFailures Failed. Waves with no cluster are passed over.
func Evaluate(st *State, waves []fleet.ResolvedWave, bake time.Duration, observe func(cluster string) ClusterProgress, now time.Time) *Progress {
	p := &Progress{Application: st.Application, Revision: st.Revision, Released: st.Released, Paused: st.Paused, Aborted: st.Aborted,
		Bake: metav1.Duration{Duration: bake}, Release: st.Released}
	for i, w := range waves {
		wp := WaveProgress{Name: w.Name, Released: i < st.Released, MaxFailures: w.MaxFailures}
		for _, c := range w.Clusters {
			cp := ClusterProgress{Cluster: c, Phase: PhaseHeld}
			if wp.Released {
				cp = observe(c)
			}
			wp.Clusters = append(wp.Clusters, cp)
		}
		p.Waves = append(p.Waves, wp)
	}
	switch {
	case st.Aborted:
		p.State, p.Blocked = ProgressAborted, "aborted: every cluster is back on its last unit Ready there; merge a new revision to roll out again"
		return p
	case st.Released >= len(waves):
		p.State, p.Blocked = ProgressComplete, "complete: every wave has the revision"
		return p
	case st.Paused:
		p.State, p.Blocked = ProgressPaused, "paused (flotilla rollout resume "+st.Application+")"
		return p
	}
	p.State = ProgressReleasable
	if st.Released > 0 {
		passed, held, why := gate(p.Waves[st.Released-1], bake, now)
		if why != "" {
			p.State, p.Blocked = held, why
			return p
		}
		p.Passed = passed
	}
	p.Release = st.Released + 1
	for p.Release < len(waves) && len(waves[p.Release-1].Clusters) == 0 {
		p.Release++
	}
	return p
}

// DueWithin says whether rollout advance may release p's next wave within
// d of now, which tells a CI job that follows the status refs whether to
// keep following them: at once (Releasable), as soon as a cluster of the
// last released wave reports Ready at the revision (Waiting: nobody knows
// when), or when its bake ends (Baking) if that is within d. Failed,
// Paused, Aborted and Complete rollouts wait for a person (a fix, a
// resume, a merge) and are never due.
func (p *Progress) DueWithin(now time.Time, d time.Duration) bool {
	switch p.State {
	case ProgressReleasable, ProgressWaiting:
		return true
	case ProgressBaking:
		return !p.BakedAt().After(now.Add(d))
	}
	return false
}

// BakedAt is when every Ready cluster of the last released wave has been
// Ready at the revision for bake (the zero time when none is Ready).
func (p *Progress) BakedAt() time.Time {
	var at time.Time
	if p.Released < 1 || p.Released > len(p.Waves) {
		return at
	}
	for _, c := range p.Waves[p.Released-1].Clusters {
		if c.Phase == PhaseReady && c.Since != nil {
			if end := c.Since.Add(p.Bake.Duration); end.After(at) {
				at = end
			}
		}
	}
	return at
}

// gate says why the wave does not let the next one go yet (and the
// rollout's state for it), or, when it does (why is ""), what it measured.
func gate(w WaveProgress, bake time.Duration, now time.Time) (passed string, held ProgressState, why string) {
	var failed, waiting, baking, baked []string
	for _, c := range w.Clusters {
		switch c.Phase {
		case PhaseFailed:
			failed = append(failed, c.Cluster+" ("+c.Reason+")")
		case PhaseReady:
			if c.Since == nil {
				// Observe sets Since for every Ready cluster; a
				// caller's progress without it cannot prove bake.
				waiting = append(waiting, c.Cluster+" Ready: since when is not known")
				continue
			}
			ready := now.Sub(c.Since.Time).Truncate(time.Second)
			at := fmt.Sprintf("%s (Ready at the revision for %s, since %s)", c.Cluster, ready, c.Since.UTC().Format(time.RFC3339))
			if now.Sub(c.Since.Time) < bake {
				baking = append(baking, fmt.Sprintf("%s (Ready at the revision for %s of %s, since %s)", c.Cluster, ready, bake, c.Since.UTC().Format(time.RFC3339)))
			} else {
				baked = append(baked, at)
			}
		default:
			waiting = append(waiting, c.Cluster+" "+string(c.Phase)+": "+c.Reason)
		}
	}
	switch {
	case len(failed) > w.MaxFailures:
		return "", ProgressFailed, fmt.Sprintf("wave %s has %d Failed cluster(s), more than maxFailures %d: %s", w.Name, len(failed), w.MaxFailures, strings.Join(failed, "; "))
	case len(waiting) > 0:
		return "", ProgressWaiting, fmt.Sprintf("wave %s is not Ready: %s", w.Name, strings.Join(waiting, "; "))
	case len(baking) > 0:
		return "", ProgressBaking, fmt.Sprintf("wave %s is baking: %s", w.Name, strings.Join(baking, "; "))
	}
	passed = fmt.Sprintf("every cluster of wave %s Ready at the revision for at least %s (bake)", w.Name, bake)
	if len(failed) > 0 {
		passed = fmt.Sprintf("wave %s Ready at the revision for at least %s (bake) but for %d Failed (maxFailures %d): %s; Ready",
			w.Name, bake, len(failed), w.MaxFailures, strings.Join(failed, "; "))
	}
	if len(baked) > 0 {
		passed += ": " + strings.Join(baked, ", ")
	}
	return passed, "", ""
}
