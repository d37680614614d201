package notify

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
)

// ContextPrefix starts every status's context: "flotilla/<application>".
const ContextPrefix = "flotilla/"

// ClusterState is where one cluster an application targets stands with
// the commit.
type ClusterState struct {
	Cluster string
	// Phase: rollout.PhaseHeld (its wave is not released), Pending (not
	// reported at the commit's content), Applied, Ready or Failed.
	Phase  rollout.Phase
	Reason string
	// Wave is the cluster's wave under a rollout.
	Wave string
}

// AppState is an application at the commit: the clusters its slices
// target, and its rollout's state when it has one.
type AppState struct {
	Application string
	Clusters    []ClusterState
	// Rollout is the rollout's state ("" without one): Paused, Aborted,
	// Failed hold it.
	Rollout rollout.ProgressState
	// Progress is the rollout as evaluated; nil without one.
	Progress *rollout.Progress
}

// Observe gathers every application of the committed slices with the
// state of each cluster it targets, from the clusters' status documents.
func Observe(repo *fleet.Repo, committed fleetrender.CommittedTree, docs map[string]fleetview.ClusterDocument, now time.Time) ([]AppState, error) {
	wants := map[string]map[string]string{} // application → cluster → unit hash
	for _, c := range repo.Clusters {
		s, err := committed.Slice(c.Metadata.Name)
		if err != nil {
			continue // not rendered (yet): nothing targets it
		}
		for _, u := range s.Units {
			if repo.Application(u.Name) == nil {
				continue
			}
			if wants[u.Name] == nil {
				wants[u.Name] = map[string]string{}
			}
			wants[u.Name][c.Metadata.Name] = u.Hash
		}
	}
	var out []AppState
	for _, a := range repo.Applications {
		name := a.Metadata.Name
		targets := wants[name]
		if len(targets) == 0 {
			continue
		}
		as := AppState{Application: name}
		st, err := committed.State(name)
		if err != nil {
			return nil, err
		}
		if ro := repo.RolloutOf(a); ro != nil && st != nil {
			p := rollout.Evaluate(st, repo.Waves(a), ro.BakeDuration(), func(cluster string) rollout.ClusterProgress {
				return fleetview.ObserveUnit(docs, cluster, name, targets[cluster])
			}, now)
			as.Rollout, as.Progress = p.State, p
			for _, w := range p.Waves {
				for _, cp := range w.Clusters {
					as.Clusters = append(as.Clusters, ClusterState{Cluster: cp.Cluster, Phase: cp.Phase, Reason: cp.Reason, Wave: w.Name})
				}
			}
		} else {
			for cluster, want := range targets {
				cp := fleetview.ObserveUnit(docs, cluster, name, want)
				as.Clusters = append(as.Clusters, ClusterState{Cluster: cluster, Phase: cp.Phase, Reason: cp.Reason})
			}
		}
		sort.Slice(as.Clusters, func(i, j int) bool { return as.Clusters[i].Cluster < as.Clusters[j].Cluster })
		out = append(out, as)
	}
	return out, nil
}

// Summarize is the application's commit status: failure naming the
// failing clusters, where a rollout is held, and why; success once every cluster it targets is
// Ready at the commit; pending otherwise, saying how many are Ready, which
// wait and at which wave a rollout holds.
func Summarize(commit string, a AppState, targetURL string) forge.CommitStatus {
	cs := forge.CommitStatus{Commit: commit, Context: ContextPrefix + a.Application, TargetURL: targetURL}
	var ready, failed, waiting, reasons []string
	held := map[string]int{}
	var heldWaves []string
	for _, c := range a.Clusters {
		switch c.Phase {
		case rollout.PhaseReady:
			ready = append(ready, c.Cluster)
		case rollout.PhaseFailed:
			failed = append(failed, c.Cluster)
			reasons = append(reasons, c.Cluster+": "+c.Reason)
		case rollout.PhaseHeld:
			if held[c.Wave] == 0 {
				heldWaves = append(heldWaves, c.Wave)
			}
			held[c.Wave]++
		default:
			waiting = append(waiting, c.Cluster)
		}
	}
	total := len(a.Clusters)
	var hold string
	if len(heldWaves) > 0 {
		hold = "held at wave " + heldWaves[0]
		switch a.Rollout {
		case rollout.ProgressPaused, rollout.ProgressAborted, rollout.ProgressFailed:
			hold += " (rollout " + strings.ToLower(string(a.Rollout)) + ")"
		}
	}
	switch {
	case len(failed) > 0:
		cs.State = forge.StateFailure
		// Who and where first: a forge cuts the description (GitHub at
		// 140 characters), and the reasons can be long.
		cs.Description = "failing on " + strings.Join(failed, ", ")
		if hold != "" {
			cs.Description += "; " + hold
		}
		if len(failed) == 1 {
			_, reasons[0], _ = strings.Cut(reasons[0], ": ")
		}
		cs.Description += ": " + strings.Join(reasons, "; ")
	case len(ready) == total:
		cs.State = forge.StateSuccess
		cs.Description = "Ready on " + plural.Count(total, "cluster", "clusters")
	default:
		cs.State = forge.StatePending
		parts := []string{fmt.Sprintf("%d/%d Ready", len(ready), total)}
		if len(waiting) > 0 {
			parts = append(parts, "applying on "+strings.Join(waiting, ", "))
		}
		if hold != "" {
			parts = append(parts, hold)
		}
		cs.Description = strings.Join(parts, "; ")
	}
	return cs
}
