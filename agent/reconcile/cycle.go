package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/metrics"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// ErrWrongBranch: the fetched revision is not the configured branch's.
var ErrWrongBranch = errors.New("revision is not from the configured branch")

// ErrNoRevision: there is no checkout to reconcile (Git has never been
// reached, or every checkout was refused).
var ErrNoRevision = errors.New("no revision to reconcile")

type syncOutcome struct {
	res gitrepo.Result
	err error
}

// sync runs Source.Sync, timing it.
func (l *Loop) sync(ctx context.Context) syncOutcome {
	start := time.Now()
	res, err := l.cfg.Source.Sync(ctx)
	d := time.Since(start)
	result := metrics.FetchSuccess
	switch {
	case errors.Is(err, gitrepo.ErrUnreachable):
		result = metrics.FetchUnreachable
	case err != nil:
		result = metrics.FetchError
	}
	l.cfg.Metrics.ObserveFetch(d, result)
	if err != nil {
		l.syncFailures++
		l.log.Warn("git sync failed", "error", l.redact.Error(err), "duration", d)
	} else {
		l.syncFailures = 0
		attrs := []any{"revision", res.Revision, "changed", res.Changed, "fetched", res.Fetched, "duration", d}
		if f, ok := l.cfg.Source.(Follower); ok {
			ref := f.Following()
			attrs = append(attrs, "ref", ref)
			l.logFollowing(ref, f.AwaitingSlice())
		}
		l.log.Debug("git sync", attrs...)
	}
	return syncOutcome{res: res, err: err}
}

// logFollowing says once, when it changes, which ref the agent fetches;
// a warning while it fetches the whole branch for want of a slice ref,
// whose size and the agent's memory grow with the fleet (docs/capacity.md).
func (l *Loop) logFollowing(ref string, awaitingSlice bool) {
	if ref == l.following {
		return
	}
	l.following = ref
	if awaitingSlice {
		l.log.Warn("no slice ref published for this cluster: fetching the whole branch, which grows with the fleet; "+
			"run flotilla publish after every merge (the fleet repo template's flotilla-publish job)", "ref", ref)
		return
	}
	l.log.Info("following ref", "ref", ref)
}

// cycleRun is the state of one cycle: what each phase found, read by the
// phases after it, and shared by the unit workers.
type cycleRun struct {
	start time.Time
	// synced is the fetch's outcome (given to cycle, or fetched by it).
	synced *syncOutcome
	// candidate is the revision fetched, else the last good checkout
	// while Git is unreachable; nil when there is neither.
	candidate *gitrepo.Result
	// verification is the candidate's signature verdict, for status.
	verification *status.Verification
	// rev is the revision the cycle reconciles: the candidate when
	// accepted, else the last accepted one; nil when there is none.
	rev        *acceptedRev
	renderOpts render.Options
	obs        *apply.Observation
	// held: units that left the slice but were not pruned (prunehold.go).
	held *heldPrune
	// problems are the cycle's loop-level failures, in order.
	problems []*status.Failure
	// result is the cycle's status document, once reported.
	result *status.ClusterStatus
	// stopHeartbeats ends the progress heartbeats before the result is
	// published: the result is always a cycle's last document.
	stopHeartbeats func()

	rendered, applied, unchanged, failed, waiting atomic.Int64
	driftCorrected                                atomic.Int64

	// trees hashes the revision's checkout for slice.CheckHash, once per
	// shared source per cycle.
	treesOnce sync.Once
	trees     *slice.TreeHasher

	// owners answers which unit claims an object (owners.go), from what
	// prepare read before any unit applies.
	owners *sliceOwners
	// watch is the Git poll that runs while units do (watch.go).
	watch *revisionWatch
}

// problem records a loop-level failure; one that does not name its reason
// is a Git operation's.
func (rc *cycleRun) problem(err error) {
	rc.problems = append(rc.problems, status.FailureOf(err, status.ReasonGitOperationFailed))
}

// cyclePhase is one step of a cycle, a function of the cycle's state.
type cyclePhase struct {
	// progress names the phase in the progress heartbeats ("" keeps the
	// phase before).
	progress string
	// needsRevision: skipped when the cycle has no revision to reconcile.
	needsRevision bool
	run           func(context.Context, *cycleRun)
}

// phases are a cycle's steps, in order (model: source-controller's list of
// reconcile functions run by one loop).
func (l *Loop) phases() []cyclePhase {
	return []cyclePhase{
		{progress: status.PhaseFetch, run: l.fetch},
		{run: l.chooseRevision},
		{needsRevision: true, run: l.prepare},
		{progress: status.PhaseUnits, needsRevision: true, run: l.runUnits},
		{progress: status.PhasePrune, needsRevision: true, run: l.pruneRemoved},
		{progress: status.PhaseStatus, run: l.report},
	}
}

func (rc *cycleRun) hasher(dir string) *slice.TreeHasher {
	rc.treesOnce.Do(func() { rc.trees = slice.NewTreeHasher(dir) })
	return rc.trees
}

func (l *Loop) cycle(ctx context.Context, pre *syncOutcome) *cycleRun {
	l.cycleMu.Lock()
	defer l.cycleMu.Unlock()
	rc := &cycleRun{start: time.Now(), synced: pre}
	l.progress.start(rc.start)
	defer l.progress.end()
	rc.stopHeartbeats = l.startHeartbeats(ctx)
	defer rc.stopHeartbeats()

	for _, p := range l.phases() {
		if p.needsRevision && rc.rev == nil {
			continue
		}
		if p.progress != "" {
			l.progress.phase(p.progress)
		}
		p.run(ctx, rc)
	}
	return rc
}

// err joins the cycle's loop-level failures; nil when there were none.
func (rc *cycleRun) err() error {
	errs := make([]error, len(rc.problems))
	for i, p := range rc.problems {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// next is the sync the next cycle reconciles at once (the watch saw the
// head move), and whether the watch took a Trigger meant for Run.
func (rc *cycleRun) next() (*syncOutcome, bool) {
	if rc.watch == nil {
		return nil, false
	}
	return rc.watch.next, rc.watch.triggered
}

// fetch syncs the source (unless the caller did) and takes its revision
// as the candidate, or the cached checkout while Git is unreachable, so
// drift is still corrected offline.
func (l *Loop) fetch(ctx context.Context, rc *cycleRun) {
	if rc.synced == nil {
		s := l.sync(ctx)
		rc.synced = &s
	}
	if rc.synced.err == nil {
		l.desired = rc.synced.res.Revision
		r := rc.synced.res
		rc.candidate = &r
		return
	}
	rc.problem(status.Retrying(status.ReasonGitOperationFailed, fmt.Errorf("fetch: %w", rc.synced.err)))
	if r, ok := l.cfg.Source.LastGood(); ok {
		rc.candidate = &r
	}
}

// chooseRevision decides the revision the cycle reconciles: the candidate
// when it is verified and its slice reads (recorded in the cluster), else
// the last accepted revision. It is the only place that sets l.accepted.
func (l *Loop) chooseRevision(ctx context.Context, rc *cycleRun) {
	refused, why := "", &status.Failure{Reason: status.ReasonGitOperationFailed}
	if c := rc.candidate; c != nil {
		rev, v, err := l.accept(ctx, *c)
		rc.verification = v
		if err == nil {
			l.accepted, rc.rev = rev, rev
			l.record(ctx, rev)
			return
		}
		rc.problem(err)
		refused, why = c.Hash, rc.problems[len(rc.problems)-1]
	}
	a, err := l.fallback(ctx, refused)
	switch {
	case a != nil:
		l.accepted, rc.rev = a, a
		if rc.candidate != nil {
			l.log.Warn("reconciling the last accepted revision", "revision", a.res.Revision, "refused", rc.candidate.Revision)
		} else {
			l.log.Warn("reconciling the last accepted revision", "revision", a.res.Revision)
		}
	case err != nil:
		// Reported as the refusal it stands in for.
		rc.problem(&status.Failure{Reason: why.Reason, Stalled: why.Stalled, Err: err})
	case rc.candidate == nil:
		rc.problem(status.Retrying(status.ReasonGitOperationFailed, ErrNoRevision))
	}
}

// report builds the cycle's status and publishes it with the metrics, after
// the last progress document.
func (l *Loop) report(ctx context.Context, rc *cycleRun) {
	fetched := ""
	if rc.candidate != nil {
		fetched = rc.candidate.Revision
	}
	rc.result = l.buildStatus(rc, fetched, rc.verification, rc.problems)
	l.addVolcanoStatus(ctx, rc, rc.result)
	rc.stopHeartbeats()
	l.finish(ctx, rc, rc.result, rc.problems)
}

// accept verifies a checkout and reads its slice, reusing both for a
// revision already accepted. A refusal is a *status.Failure.
func (l *Loop) accept(ctx context.Context, res gitrepo.Result) (*acceptedRev, *status.Verification, error) {
	if a := l.accepted; a != nil && !a.restored && a.res.Hash == res.Hash && a.res.Dir == res.Dir {
		return a, l.verified[res.Hash].v, nil
	}
	if !strings.HasPrefix(res.Revision, l.cfg.Branch+"@sha1:") {
		return nil, nil, status.Stalling(status.ReasonVerificationFailed, fmt.Errorf("verify %s: %w %q", res.Revision, ErrWrongBranch, l.cfg.Branch))
	}
	var v *status.Verification
	if l.cfg.Verifier != nil {
		cached, ok := l.verified[res.Hash]
		if !ok {
			var err error
			cached.v, err = l.cfg.Verifier.Verify(ctx, res)
			if err != nil {
				// Any error of the verifier refuses the commit.
				return nil, cached.v, status.Stalling(status.ReasonVerificationFailed, fmt.Errorf("verify %s: %w", res.Revision, err))
			}
			// Keep the newest verdicts only: one per accepted revision.
			clear(l.verified)
			l.verified[res.Hash] = cached
		}
		v = cached.v
	}
	sl, err := slice.Read(res.Dir, l.cfg.Cluster)
	if err != nil {
		return nil, v, status.Stalling(status.ReasonRenderFailed, fmt.Errorf("revision %s: %w", res.Revision, err))
	}
	return &acceptedRev{res: res, slice: sl}, v, nil
}

// fallback is the revision to reconcile instead of a refused or unreadable
// head (refused; "" when there is no head at all): this process's last
// accepted revision, else the one recorded in the cluster by an earlier
// process, checked out again when its directory is gone (a new cache, or
// removed by a later sync). Nil when there is none or it cannot be had;
// the error, for status, is a record in the cluster that cannot be read or
// is corrupt (never trusted).
func (l *Loop) fallback(ctx context.Context, refused string) (*acceptedRev, error) {
	a := l.accepted
	if a == nil && l.cfg.State != nil {
		rev, err := l.cfg.State.LoadAccepted(ctx)
		if err != nil {
			return nil, fmt.Errorf("last accepted revision: %w", err)
		}
		hash, ok := strings.CutPrefix(rev, l.cfg.Branch+"@sha1:")
		if !ok || hash == "" {
			return nil, nil
		}
		a = &acceptedRev{res: gitrepo.Result{Revision: rev, Hash: hash}, restored: true}
	}
	if a == nil || a.res.Hash == refused {
		return nil, nil
	}
	if !dirExists(a.res.Dir) {
		co, ok := l.cfg.Source.(Checkouter)
		if !ok {
			return nil, nil
		}
		res, err := co.Checkout(ctx, a.res.Hash)
		if err != nil {
			l.log.Warn("checking out the last accepted revision failed", "revision", a.res.Revision, "error", l.redact.Error(err))
			return nil, nil
		}
		sl, err := slice.Read(res.Dir, l.cfg.Cluster)
		if err != nil {
			l.log.Warn("reading the last accepted revision's slice failed", "revision", a.res.Revision, "error", l.redact.Error(err))
			return nil, nil
		}
		a = &acceptedRev{res: res, slice: sl, restored: a.restored}
	}
	return a, nil
}

// record writes an accepted revision to the cluster once; a failed write
// is retried next cycle.
func (l *Loop) record(ctx context.Context, a *acceptedRev) {
	if l.cfg.State == nil || a == nil || l.recorded == a.res.Revision {
		return
	}
	if err := l.cfg.State.SaveAccepted(ctx, a.res.Revision); err != nil {
		l.log.Warn("recording the last accepted revision failed", "revision", a.res.Revision, "error", l.redact.Error(err))
		return
	}
	l.recorded = a.res.Revision
}

// prepare does the cycle's per-cluster reads: discovery (for Helm
// capabilities and status) and one Observation of every managed object.
func (l *Loop) prepare(ctx context.Context, rc *cycleRun) {
	rc.renderOpts = l.cfg.Render
	if l.cfg.Discovery != nil {
		info, err := l.cfg.Discovery.Discover(ctx)
		if err != nil {
			l.log.Warn("discovery failed; using the last known capabilities", "error", l.redact.Error(err))
		} else {
			l.info, l.infoOK = info, true
		}
	}
	if l.infoOK {
		rc.renderOpts.Capabilities = render.Capabilities{
			KubeVersion: l.info.KubeVersion,
			APIVersions: append(slices.Clone(l.info.GroupVersions), l.info.Resources...),
			Namespaced:  l.info.Namespaced,
		}
	}
	obs, err := l.cfg.Applier.Observe(ctx)
	if err != nil {
		// Not fatal: Check and Apply read objects one by one instead.
		l.log.Warn("observe managed objects failed", "error", l.redact.Error(err))
		obs = nil
	}
	rc.obs = obs
	rc.owners = newSliceOwners(ctx, l, rc)
}

// pruneRemoved deletes the units that have an inventory but left the slice.
func (l *Loop) pruneRemoved(ctx context.Context, rc *cycleRun) {
	inv, err := l.cfg.Applier.Units(ctx)
	if err != nil {
		l.log.Warn("list unit inventories failed; units that left the slice are pruned next cycle", "error", l.redact.Error(err))
		if inv == nil {
			return
		}
	}
	inSlice := make(map[string]bool, len(rc.rev.slice.Units))
	for _, u := range rc.rev.slice.Units {
		inSlice[u.Name] = true
	}
	var gone []string
	for _, u := range inv {
		if !inSlice[u] {
			gone = append(gone, u)
		}
	}
	for name := range l.removed {
		if inSlice[name] || !slices.Contains(gone, name) {
			delete(l.removed, name)
		}
	}
	if len(gone) == 0 {
		return
	}
	if holdPrune(len(gone), len(inv), l.cfg.PruneHoldFraction, rc.rev.slice.Decommission) {
		slices.Sort(gone)
		rc.held = &heldPrune{units: gone, managed: len(inv), fraction: l.cfg.PruneHoldFraction}
		l.log.Warn("prune held: too many units left the slice", "units", len(gone), "managed", len(inv), "held", strings.Join(gone, ","))
		return
	}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		sem = make(chan struct{}, l.cfg.Workers)
	)
	for _, name := range gone {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if l.retainJob(ctx, name) {
				return
			}
			res, err := l.cfg.Applier.DeleteUnit(ctx, name, rc.owners)
			mu.Lock()
			defer mu.Unlock()
			l.unitsMu.Lock()
			delete(l.units, name)
			l.unitsMu.Unlock()
			if err != nil && !errors.Is(err, apply.ErrNoInventory) {
				st := l.removed[name]
				if st == nil {
					st = &unitState{}
					l.removed[name] = st
				}
				st.record(outcome{
					err:     status.Retrying(status.ReasonPruneFailed, err),
					message: "unit left the slice; deleting it failed: " + l.redact.Error(err),
				}, l.redact, "", "", time.Now())
				l.log.Warn("delete unit that left the slice failed", "unit", name, "error", st.lastError)
				return
			}
			delete(l.removed, name)
			attrs := []any{"unit", name}
			if res != nil {
				attrs = append(attrs, "pruned", len(res.Pruned), "kept", len(res.PruneKept), "orphaned", len(res.Orphaned))
				for _, k := range res.KeptNamespaces {
					l.log.Warn(k, "unit", name)
				}
			}
			l.log.Info("unit left the slice; deleted", attrs...)
		})
	}
	wg.Wait()
}

// finish publishes status and metrics and logs the cycle.
func (l *Loop) finish(ctx context.Context, rc *cycleRun, st *status.ClusterStatus, problems []*status.Failure) {
	d := time.Since(rc.start)
	result := metrics.ResultSuccess
	switch {
	case rc.rev == nil || ctx.Err() != nil:
		result = metrics.ResultFailure
	case len(problems) > 0 || rc.failed.Load() > 0 || rc.waiting.Load() > 0 || !allReady(st):
		result = metrics.ResultPartial
	}
	m := l.cfg.Metrics
	m.ObserveCycle(d, result)
	m.AddDriftCorrections(int(rc.driftCorrected.Load()))
	ready := map[string]bool{}
	managed := 0
	for _, u := range st.Units {
		ready[u.Name] = unitReady(u)
		managed += u.Objects
	}
	m.SetUnits(ready)
	m.SetManagedObjects(managed)
	m.SetAppliedRevision(st.AppliedRevision)
	m.SetPruneHeld(status.PruneHeld(st) != "")

	if rc.rev != nil && ctx.Err() == nil {
		l.ready.Store(true)
	}
	attrs := []any{
		"result", result, "duration", d.Round(time.Millisecond),
		"desiredRevision", st.DesiredRevision, "appliedRevision", st.AppliedRevision,
		"units", len(st.Units), "rendered", rc.rendered.Load(), "applied", rc.applied.Load(),
		"unchanged", rc.unchanged.Load(), "failed", rc.failed.Load(), "waiting", rc.waiting.Load(),
		"driftCorrected", rc.driftCorrected.Load(),
	}
	if rc.rev != nil {
		attrs = append(attrs, "revision", rc.rev.res.Revision)
	}
	if st.LastError != "" {
		attrs = append(attrs, "error", st.LastError)
	}
	l.log.Info("cycle finished", attrs...)

	l.statusMu.Lock()
	l.last = st
	l.statusMu.Unlock()
	if l.cfg.Sink != nil {
		// The document is worth publishing even when the cycle was cancelled.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := l.cfg.Sink.Publish(pctx, st); err != nil {
			l.log.Warn("publish status failed", "error", l.redact.Error(err))
		}
	}
}

func allReady(st *status.ClusterStatus) bool {
	for _, u := range st.Units {
		if !unitReady(u) {
			return false
		}
	}
	return true
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
