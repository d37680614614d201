package status

import (
	"bytes"
	"encoding/json"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MeaningfullyChanged reports whether cur says something old did not, i.e.
// whether it is worth a commit before the next heartbeat. It ignores:
//
//   - the heartbeat itself and conditions' lastTransitionTime;
//   - revision strings (desired, fetched, applied; per unit too) whose
//     presence did not change: a merge that leaves this cluster's slice
//     alone moves every revision but no unit hash, and committing that on
//     every cluster would cost one push per cluster per merge (the hub
//     knows from Git that such a cluster is still in sync). A merge that
//     changes the slice changes a unit's hash, which counts. Commit hashes
//     inside messages ("applied main@sha1:…") are ignored likewise;
//   - a running cycle's progress, other than whether there is one;
//   - counters that move with load rather than with events: drift
//     corrections, free capacity, queue allocations and job running-pod
//     counts.
//
// These ride along with the next commit or heartbeat. A nil old (nothing
// committed yet) is always a change.
func MeaningfullyChanged(old, cur *ClusterStatus) bool {
	if old == nil || cur == nil {
		return old != cur
	}
	a, errA := json.Marshal(comparable(old))
	b, errB := json.Marshal(comparable(cur))
	if errA != nil || errB != nil {
		return true
	}
	return !bytes.Equal(a, b)
}

// comparable is a normalized copy without the fields MeaningfullyChanged
// ignores.
func comparable(doc *ClusterStatus) *ClusterStatus {
	d := Normalized(doc)
	d.Heartbeat = metav1.Time{}
	// Progress rides along with heartbeats; only its start (a cycle
	// that outlasted a heartbeat tick) and its end are worth a commit.
	if d.Progress != nil {
		d.Progress = &Progress{}
	}
	d.DesiredRevision = presence(d.DesiredRevision)
	d.FetchedRevision = presence(d.FetchedRevision)
	d.AppliedRevision = presence(d.AppliedRevision)
	stripTimes(d.Conditions)
	for i := range d.Units {
		u := &d.Units[i]
		u.AppliedRevision = presence(u.AppliedRevision)
		u.DriftCorrections = 0
		u.LastError = commitHash.ReplaceAllString(u.LastError, "<commit>")
		stripTimes(u.Conditions)
	}
	for i := range d.Jobs {
		d.Jobs[i].Running = 0
	}
	if d.Capacity != nil {
		d.Capacity.Free = nil
		for i := range d.Capacity.Queues {
			d.Capacity.Queues[i].Allocated = nil
		}
	}
	return d
}

func presence(rev string) string {
	if rev == "" {
		return ""
	}
	return "set"
}

// commitHash matches full SHA-1/SHA-256 hashes and "sha1:<abbreviated>".
var commitHash = regexp.MustCompile(`\b(?:sha1:|sha256:)?[0-9a-f]{40}(?:[0-9a-f]{24})?\b|\bsha1:[0-9a-f]{7,39}\b`)

func stripTimes(cs []metav1.Condition) {
	for i := range cs {
		cs[i].LastTransitionTime = metav1.Time{}
		cs[i].ObservedGeneration = 0
		cs[i].Message = commitHash.ReplaceAllString(cs[i].Message, "<commit>")
	}
}
