package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/agent/metrics"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Defaults for Config fields left zero.
const (
	DefaultInterval      = time.Minute
	DefaultJitter        = 0.1
	DefaultWorkers       = 8
	DefaultShutdownGrace = 30 * time.Second
	// DefaultReadyRecheck: how long after a unit became Ready at its
	// content its health is still read every cycle (Config.ReadyRecheck).
	DefaultReadyRecheck = 24 * time.Hour
)

// Config wires a Loop. Cluster, Source and Applier are required.
type Config struct {
	// Cluster is this cluster's name in the fleet repo.
	Cluster string
	// Branch the revision must come from; "main" when empty.
	Branch  string
	Source  Source
	Applier Applier
	// Discovery gives Helm its capabilities and status the live versions;
	// nil leaves Helm's defaults.
	Discovery Discovery
	// Verifier accepts or refuses fetched commits; nil accepts every commit
	// of the branch.
	Verifier Verifier
	// State records the last accepted revision in the cluster; nil keeps
	// it in memory only.
	State AcceptedStore
	// Volcano submits job units and reports jobs and capacity
	// (volcano.go); nil applies volcano units like manifests.
	Volcano Volcano
	// Sink receives the status document after every cycle, and progress
	// documents while one runs (progress.go); nil drops them.
	Sink    StatusSink
	Metrics *metrics.Metrics
	Logger  *slog.Logger

	// Heartbeat: while a cycle runs, the last result is published with
	// the cycle's progress every Heartbeat / 2 (the status writer's
	// heartbeat interval); status.DefaultHeartbeatInterval when zero.
	Heartbeat time.Duration
	// Previous is the last document an earlier process published (its
	// --status-file), the base of progress documents until this process's
	// first cycle ends; optional.
	Previous *status.ClusterStatus

	// ReadyRecheck: a unit with wait that is up to date and Ready has its
	// health read once more every cycle until it has been Ready at its
	// content this long, so a revision that breaks after some minutes (a
	// crash loop under traffic) is reported while a rollout bakes it;
	// after that it stays Ready without reads. DefaultReadyRecheck when
	// zero; negative: never re-read.
	ReadyRecheck time.Duration

	// Interval between cycles (drift correction), ± Jitter (a fraction).
	Interval time.Duration
	Jitter   float64
	// PollInterval between Git polls within an interval; a moved head
	// starts a cycle at once. Zero or ≥ Interval: poll once per cycle.
	PollInterval time.Duration
	// Workers bounds the units rendered and applied at once.
	Workers int
	// PruneHoldFraction: when units leaving the slice are all the cluster
	// manages, or more than this fraction of them, they are not pruned
	// unless the slice is marked decommission (prunehold.go). In (0, 1];
	// DefaultPruneHoldFraction when zero.
	PruneHoldFraction float64
	// Render options; Capabilities are filled from Discovery every cycle.
	Render render.Options
	// ShutdownGrace is how long the current cycle may go on after Run's
	// context ends.
	ShutdownGrace time.Duration
	// ReleaseMemory runs after every cycle of Run, before the wait for the
	// next: it hands what the cycle used back to the OS.
	// debug.FreeOSMemory when nil.
	ReleaseMemory func()

	// Identity and AgentVersion go into status.
	Identity     string
	AgentVersion string
	// Secrets are scrubbed from every message that reaches logs or status.
	Secrets []string
}

// Loop reconciles one cluster. Cycle and Run must not be called
// concurrently; Ready, Status and Trigger may be called at any time.
type Loop struct {
	cfg    Config
	log    *slog.Logger
	redact redact.Scrubber

	trigger chan struct{}
	ready   atomic.Bool

	cycleMu sync.Mutex // one cycle at a time

	// State carried between cycles (cycleMu).
	desired           string       // last branch head seen
	accepted          *acceptedRev // last revision that passed verify and slice read
	recorded          string       // the accepted revision last written to State
	verified          map[string]verification
	info              ClusterInfo
	infoOK            bool
	clusterConditions []metav1.Condition
	appliedRevision   string
	removed           map[string]*unitState // units that left the slice but whose delete failed
	// syncFailures counts consecutive failed Git syncs; Run backs its
	// polls off while Git fails (pollDelay).
	syncFailures int
	// following is the ref the last sync followed (logFollowing).
	following string
	// syncFailures and following are written by sync without cycleMu:
	// by Run between cycles, by a cycle's fetch, and by the cycle's watch
	// while the cycle's goroutine waits for its units; never two at once
	// while Cycle and Run are not called concurrently
	// (TestLoopRunPollsWhileCyclesRun, under -race).

	unitsMu sync.Mutex
	units   map[string]*unitState

	statusMu sync.Mutex
	last     *status.ClusterStatus

	progress progressTracker
}

// acceptedRev is a checkout that passed verification and whose slice was read.
type acceptedRev struct {
	res   gitrepo.Result
	slice *slice.Slice
	// restored: accepted by an earlier process (read back from State); a
	// head at this commit is verified again, not taken as accepted.
	restored bool
}

type verification struct {
	v *status.Verification
}

// New checks cfg and builds a Loop.
func New(cfg Config) (*Loop, error) {
	if cfg.Cluster == "" {
		return nil, errors.New("reconcile: Config.Cluster is required")
	}
	if cfg.Source == nil || cfg.Applier == nil {
		return nil, errors.New("reconcile: Config.Source and Config.Applier are required")
	}
	if cfg.Branch == "" {
		cfg.Branch = "main"
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Jitter == 0 {
		cfg.Jitter = DefaultJitter
	}
	if cfg.Jitter < 0 {
		cfg.Jitter = 0
	}
	if cfg.Jitter > 0.5 {
		cfg.Jitter = 0.5
	}
	if cfg.PollInterval <= 0 || cfg.PollInterval > cfg.Interval {
		cfg.PollInterval = cfg.Interval
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.ReadyRecheck == 0 {
		cfg.ReadyRecheck = DefaultReadyRecheck
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = status.DefaultHeartbeatInterval
	}
	if cfg.Previous != nil && cfg.Previous.Cluster != cfg.Cluster {
		cfg.Previous = nil
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.PruneHoldFraction == 0 {
		cfg.PruneHoldFraction = DefaultPruneHoldFraction
	}
	if cfg.PruneHoldFraction < 0 || cfg.PruneHoldFraction > 1 {
		return nil, fmt.Errorf("reconcile: Config.PruneHoldFraction %g is not in (0, 1]", cfg.PruneHoldFraction)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Loop{
		cfg:      cfg,
		log:      log.With("cluster", cfg.Cluster),
		redact:   redact.New(cfg.Secrets...),
		trigger:  make(chan struct{}, 1),
		verified: map[string]verification{},
		removed:  map[string]*unitState{},
		units:    map[string]*unitState{},
	}, nil
}

// Ready reports whether a cycle has reconciled a revision.
func (l *Loop) Ready() bool { return l.ready.Load() }

// Status returns the last published status document (nil before the
// first cycle). The caller must not modify it.
func (l *Loop) Status() *status.ClusterStatus {
	l.statusMu.Lock()
	defer l.statusMu.Unlock()
	return l.last
}

// Trigger asks Run to start a cycle now (e.g. a webhook).
func (l *Loop) Trigger() {
	select {
	case l.trigger <- struct{}{}:
	default:
	}
}

// Run runs cycles until ctx ends, then lets the current cycle finish for
// up to Config.ShutdownGrace before cancelling it. It returns nil after a
// clean stop.
func (l *Loop) Run(ctx context.Context) error {
	var pre *syncOutcome
	for {
		if ctx.Err() != nil {
			return nil
		}
		cctx, cancel := graceContext(ctx, l.cfg.ShutdownGrace)
		rc := l.cycle(cctx, pre)
		cancel()
		// A head that moved while units waited is reconciled at once.
		moved, triggered := rc.next()
		pre = moved
		if triggered && moved == nil {
			l.Trigger()
		}
		// A cycle's garbage (rendered objects, API responses) is large next
		// to what the agent keeps; hand it back to the OS instead of holding
		// the cycle's peak until the scavenger gets to it. One GC per cycle.
		if l.cfg.ReleaseMemory != nil {
			l.cfg.ReleaseMemory()
		} else {
			debug.FreeOSMemory()
		}
		if ctx.Err() != nil {
			return nil
		}
		next := time.Now().Add(Jitter(l.cfg.Interval, l.cfg.Jitter))
		for pre == nil {
			wait := time.Until(next)
			if wait <= 0 {
				break
			}
			poll := pollDelay(l.cfg.PollInterval, l.cfg.Interval, l.cfg.Jitter, l.syncFailures)
			if poll < wait {
				wait = poll
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-l.trigger:
				t.Stop()
				next = time.Now()
			case <-t.C:
			}
			if time.Now().Before(next) {
				// An intermediate poll: start a cycle at once when the head moved.
				if so := l.sync(ctx); so.err == nil && so.res.Changed {
					pre = &so
				}
			}
		}
	}
}

// pollDelay is the wait before the next Git poll between cycles: the poll
// interval (jittered) while Git answers; after failed syncs an
// exponentially growing, jittered delay (gitrepo.Backoff) from the poll
// interval up to the cycle interval, so that a fleet of agents does not
// hammer a Git server that is down. Cycles, and with them drift
// correction from the cached checkout, still run every interval.
func pollDelay(poll, interval time.Duration, jitter float64, failures int) time.Duration {
	if failures <= 0 || poll >= interval {
		return Jitter(poll, jitter)
	}
	return gitrepo.Backoff{Initial: 2 * poll, Max: interval}.Delay(failures - 1)
}

// graceContext is a context that ends ShutdownGrace after parent ends.
func graceContext(parent context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(parent, func() {
		mu.Lock()
		timer = time.AfterFunc(grace, cancel)
		mu.Unlock()
	})
	return ctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// Jitter returns d changed by a random fraction in [-frac, +frac].
// (fluxcd/pkg/runtime/jitter does the same, but importing it links
// controller-runtime's manager and webhooks into the agent.)
func Jitter(d time.Duration, frac float64) time.Duration {
	if frac <= 0 || d <= 0 {
		return d
	}
	delta := (rand.Float64()*2 - 1) * frac * float64(d)
	return d + time.Duration(delta)
}

// Cycle runs one reconcile cycle now and returns the status document it
// published. The error is the cycle's loop-level failure (no revision to
// reconcile, a refused commit, an unreadable slice), already in the
// document; unit failures are only in the document.
func (l *Loop) Cycle(ctx context.Context) (*status.ClusterStatus, error) {
	rc := l.cycle(ctx, nil)
	return rc.result, rc.err()
}
