package reconcile

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Heartbeats while a cycle runs: a cycle that waits long (a unit's health
// wait of minutes, an API server that comes and goes) must not make its
// cluster look unreachable, so every Config.Heartbeat / 2 the loop
// publishes the last cycle's result again with this cycle's progress. The
// sink (the status writer) pushes it when its heartbeat is due.
//
// The result of a cycle is always published last: the heartbeat goroutine
// is stopped, and waited for, before the cycle publishes its own document,
// and each heartbeat is built from the newest result there is. Documents
// are whole copies; a sink never sees one being changed.

// progressTracker is the running cycle's progress (nil between cycles).
type progressTracker struct {
	mu sync.Mutex
	p  *status.Progress
	// waiting is what a unit of the running cycle waits for (objects not
	// ready and why), by unit name, while it waits.
	waiting map[string]string
}

func (t *progressTracker) start(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p = &status.Progress{Phase: status.PhaseFetch, Started: metav1.NewTime(at.UTC().Truncate(time.Second))}
}

func (t *progressTracker) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p = nil
	t.waiting = nil
}

// wait records what unit waits for, until it is done.
func (t *progressTracker) wait(unit, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p == nil {
		return
	}
	if t.waiting == nil {
		t.waiting = map[string]string{}
	}
	t.waiting[unit] = msg
}

func (t *progressTracker) phase(p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p != nil {
		t.p.Phase = p
	}
}

// unitStarted records that unit is being reconciled; the returned func
// records that it is done.
func (t *progressTracker) unitStarted(unit string, at time.Time) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p == nil {
		return func() {}
	}
	t.p.Units = append(t.p.Units, status.UnitProgress{Name: unit, Since: metav1.NewTime(at.UTC().Truncate(time.Second))})
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.p != nil {
			t.p.Units = slices.DeleteFunc(t.p.Units, func(u status.UnitProgress) bool { return u.Name == unit })
		}
		delete(t.waiting, unit)
	}
}

// snapshot is a copy of the progress, units sorted by name, and of what
// units wait for; nil between cycles.
func (t *progressTracker) snapshot() (*status.Progress, map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p == nil {
		return nil, nil
	}
	p := *t.p
	p.Units = slices.Clone(t.p.Units)
	slices.SortFunc(p.Units, func(a, b status.UnitProgress) int { return cmp.Compare(a.Name, b.Name) })
	return &p, maps.Clone(t.waiting)
}

// progressDoc is the document a heartbeat publishes: the newest cycle
// result (this process's, else Config.Previous) with the running cycle's
// progress; nil when there is neither a result nor a cycle running.
func (l *Loop) progressDoc(now time.Time) *status.ClusterStatus {
	l.statusMu.Lock()
	base := l.last
	l.statusMu.Unlock()
	if base == nil {
		base = l.cfg.Previous
	}
	p, waiting := l.progress.snapshot()
	if base == nil || p == nil {
		return nil
	}
	doc := base.DeepCopy()
	doc.Progress = p
	markWaiting(doc, waiting, now)
	doc.Agent = status.Agent{Version: l.cfg.AgentVersion, Identity: l.cfg.Identity}
	doc.Heartbeat = metav1.NewTime(now.UTC().Truncate(time.Second))
	return doc
}

// markWaiting sets Reconciling on each unit that waits, with what it waits
// for, so a heartbeat shows why a unit is not yet at the new revision; a
// unit new at this revision gets an entry of its own. The cycle's own
// result carries no Reconciling: the wait is over by then.
func markWaiting(doc *status.ClusterStatus, waiting map[string]string, now time.Time) {
	for _, unit := range slices.Sorted(maps.Keys(waiting)) {
		i := slices.IndexFunc(doc.Units, func(u status.UnitStatus) bool { return u.Name == unit })
		if i < 0 {
			doc.Units = append(doc.Units, status.UnitStatus{Name: unit})
			i = len(doc.Units) - 1
		}
		apimeta.SetStatusCondition(&doc.Units[i].Conditions, metav1.Condition{
			Type: status.ConditionReconciling, Status: metav1.ConditionTrue, Reason: status.ReasonProgressing,
			Message: waiting[unit], LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second)),
		})
	}
}

// startHeartbeats publishes progress documents until the returned stop is
// called; stop returns once the last one is published (or abandoned).
func (l *Loop) startHeartbeats(ctx context.Context) (stop func()) {
	if l.cfg.Sink == nil {
		return func() {}
	}
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(l.cfg.Heartbeat/2, 100*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case now := <-t.C:
				doc := l.progressDoc(now)
				if doc == nil {
					continue
				}
				if err := l.cfg.Sink.Publish(hctx, doc); err != nil && hctx.Err() == nil {
					l.log.Warn("publish progress failed", "error", l.redact.Error(err))
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}
