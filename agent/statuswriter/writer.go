package statuswriter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/pkg/version"
)

// Writer defaults.
const (
	DefaultHeartbeatJitter = 0.1
	// DefaultMaxHistory bounds a status ref to this many commits; past it
	// the ref is squashed into one root commit (about 10 days of 10-minute
	// heartbeats, a few KiB each).
	DefaultMaxHistory = 1000
	// DefaultPushTimeout bounds one push (each network operation of it).
	DefaultPushTimeout = 30 * time.Second
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Cluster names the cluster; the Writer commits only to RefFor(Cluster).
	Cluster string
	// URL is the status repository: the fleet repo, or a separate (already
	// shard-resolved, see ShardURL) status repo.
	URL  string
	Auth gitrepo.Auth
	// Timeout bounds each network operation of a push; DefaultPushTimeout
	// when zero.
	Timeout time.Duration
	// HeartbeatInterval: an unchanged document is committed again (with a
	// new heartbeat) this long after the last commit, ± HeartbeatJitter.
	HeartbeatInterval time.Duration
	// HeartbeatJitter is the fraction of the interval added or removed at
	// random, so agents started together do not push together; 0.1 when
	// zero, none when negative.
	HeartbeatJitter float64
	// MaxHistory bounds the ref's commits (squash past it, the only force
	// push, on this ref only); DefaultMaxHistory when zero, unbounded when
	// negative.
	MaxHistory int
	// Signer signs every status commit when set.
	Signer signature.Signer
	// Registerer receives flotilla_status_push_total{result},
	// flotilla_status_push_duration_seconds and flotilla_status_pending;
	// none when nil. Writers may share one.
	Registerer prometheus.Registerer
	// RetryBackoff spaces Run's retries of a pending document; the zero
	// value starts at 1s and caps at 5m.
	RetryBackoff gitrepo.Backoff
	// InstanceID identifies the cluster instance (the agent passes its
	// kube-system namespace's UID); written into every document. Before
	// each commit the writer reads the document on its ref, and when that
	// one names another instance it refuses (ErrInstanceConflict) unless
	// TakeOver is set or that document's heartbeat is older than
	// TakeOverAfter: a re-installed cluster takes its ref over once the
	// old instance has gone quiet. Empty: no check (and a v1alpha1
	// document).
	InstanceID string
	// TakeOver overwrites a document of another instance at once (the
	// agent's --status-take-over, for a re-install that cannot wait).
	TakeOver bool
	// TakeOverAfter is how long another instance's document must have gone
	// without a heartbeat before this writer takes the ref over;
	// DefaultTakeOverHeartbeats × HeartbeatInterval when zero, which
	// matches the hub's default Unreachable threshold.
	TakeOverAfter time.Duration
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
}

// DefaultTakeOverHeartbeats: another instance's document is taken over
// after this many heartbeat intervals without one.
const DefaultTakeOverHeartbeats = 3

// ErrInstanceConflict: the status ref holds a live document of another
// cluster instance (two agents configured with the same cluster name); the
// writer does not overwrite it. Test with errors.Is.
var ErrInstanceConflict = errors.New("status Conflict: the ref is written by another cluster instance")

// Writer commits a cluster's status document to its status ref. It is the
// agent loop's status sink: call Publish after every cycle. A document is
// committed when it changed meaningfully (MeaningfullyChanged) since the
// last commit, or when the heartbeat is due; otherwise Publish only keeps
// it. While Git is unreachable only the latest document is kept and it is
// pushed once, as one commit, when Git returns (by the next Publish, by
// Flush, or by Run's retries). Every message is redacted (RedactDocument)
// before it leaves the process. Safe for concurrent use.
type Writer struct {
	opts    WriterOptions
	ref     string
	author  string
	email   string
	git     *gitrepo.Writer
	metrics *writerMetrics
	now     func() time.Time
	kick    chan struct{}

	pushMu sync.Mutex // one push at a time

	mu            sync.Mutex
	latest        *status.ClusterStatus // last published, redacted
	committed     *status.ClusterStatus // last pushed
	due           bool                  // latest must be pushed (changed, or an owed push failed)
	nextHeartbeat time.Time
	lastErr       error
}

// PublishResult says what a Publish or Flush did.
type PublishResult struct {
	// Pushed: a commit was pushed. Heartbeat: it carried no meaningful
	// change, only a new heartbeat.
	Pushed    bool
	Heartbeat bool
	Commit    string
	Squashed  bool
}

// NewWriter validates opts and returns a Writer; it does not touch the
// network.
func NewWriter(opts WriterOptions) (*Writer, error) {
	if opts.Cluster == "" {
		return nil, errors.New("status writer: cluster name is empty")
	}
	if opts.URL == "" {
		return nil, errors.New("status writer: status repo URL is empty")
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = status.DefaultHeartbeatInterval
	}
	if opts.HeartbeatJitter == 0 {
		opts.HeartbeatJitter = DefaultHeartbeatJitter
	} else if opts.HeartbeatJitter < 0 || opts.HeartbeatJitter >= 1 {
		opts.HeartbeatJitter = 0
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultPushTimeout
	}
	if opts.TakeOverAfter <= 0 {
		opts.TakeOverAfter = DefaultTakeOverHeartbeats * opts.HeartbeatInterval
	}
	maxHistory := opts.MaxHistory
	switch {
	case maxHistory == 0:
		maxHistory = DefaultMaxHistory
	case maxHistory < 0:
		maxHistory = 0
	}
	if opts.RetryBackoff.Initial == 0 {
		opts.RetryBackoff.Initial = time.Second
	}
	if opts.RetryBackoff.Max == 0 {
		opts.RetryBackoff.Max = 5 * time.Minute
	}
	m, err := newWriterMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("status writer metrics: %w", err)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	w := &Writer{
		opts:    opts,
		ref:     status.RefFor(opts.Cluster),
		author:  opts.Cluster,
		email:   "agent@" + opts.Cluster + ".flotilla",
		metrics: m,
		now:     now,
		kick:    make(chan struct{}, 1),
	}
	po := gitrepo.PushOptions{
		Auth:       opts.Auth,
		Timeout:    opts.Timeout,
		MaxHistory: maxHistory,
		Signer:     opts.Signer,
		Backoff:    gitrepo.Backoff{Initial: 50 * time.Millisecond, Max: 5 * time.Second},
	}
	if opts.InstanceID != "" {
		po.Guard = w.guard
	}
	w.git = gitrepo.NewWriter(opts.URL, po)
	return w, nil
}

// guard refuses to commit over a live document of another instance. A
// document it cannot decode, or one without an instance (an older agent),
// is overwritten: there is no one to tell apart.
func (w *Writer) guard(_ string, read func(string) ([]byte, bool, error)) error {
	data, found, err := read(status.FileName)
	if err != nil || !found {
		return nil
	}
	cur, err := status.Decode(data)
	if err != nil || cur.InstanceID == "" || cur.InstanceID == w.opts.InstanceID {
		return nil
	}
	quiet := w.now().Sub(cur.Heartbeat.Time)
	if w.opts.TakeOver || quiet > w.opts.TakeOverAfter {
		return nil
	}
	return fmt.Errorf("%w: the ref's document is from instance %s (this agent is %s), last heartbeat %s ago; "+
		"if this cluster was re-installed, it is taken over %s after the old one's last heartbeat, or at once with --status-take-over",
		ErrInstanceConflict, cur.InstanceID, w.opts.InstanceID, quiet.Round(time.Second), w.opts.TakeOverAfter)
}

// Ref is the only ref this Writer pushes.
func (w *Writer) Ref() string { return w.ref }

// Publish records doc as the cluster's current status and pushes it when
// it changed meaningfully since the last commit or the heartbeat is due.
// doc is copied; its apiVersion, kind, cluster (when empty) and agent
// version (when empty) are filled in and its heartbeat is set at commit
// time. A push error is returned, but the document is kept and pushed
// later: the caller may log the error and carry on.
func (w *Writer) Publish(ctx context.Context, doc *status.ClusterStatus) error {
	_, err := w.PublishResult(ctx, doc)
	return err
}

// PublishResult is Publish, also saying what was pushed.
func (w *Writer) PublishResult(ctx context.Context, doc *status.ClusterStatus) (PublishResult, error) {
	d, err := w.prepare(doc)
	if err != nil {
		return PublishResult{}, err
	}
	w.mu.Lock()
	w.latest = d
	if w.committed == nil || status.MeaningfullyChanged(w.committed, d) {
		w.due = true
	}
	push := w.due || !w.now().Before(w.nextHeartbeat)
	w.metrics.setPending(w.due)
	w.mu.Unlock()
	w.wake()
	if !push {
		return PublishResult{}, nil
	}
	return w.push(ctx, false)
}

// Flush pushes the latest document now if a push is owed (a change not yet
// committed, or a push that failed), or when force is set (a heartbeat).
func (w *Writer) Flush(ctx context.Context, force bool) (PublishResult, error) {
	return w.push(ctx, force)
}

// Pending reports whether a document is waiting to be pushed.
func (w *Writer) Pending() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.due
}

// Committed returns a copy of the last document pushed (nil before the
// first push).
func (w *Writer) Committed() *status.ClusterStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed.DeepCopy()
}

// LastError is the error of the latest push attempt, nil after a success.
func (w *Writer) LastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// Run pushes heartbeats when they are due and retries a pending document
// with backoff, until ctx is done (then it returns nil). Publish works
// without Run; Run keeps the heartbeat going while a cycle takes long and
// pushes a buffered document soon after Git returns.
func (w *Writer) Run(ctx context.Context) error {
	failures := 0
	for {
		w.mu.Lock()
		hasDoc, due := w.latest != nil, w.due
		wait := w.nextHeartbeat.Sub(w.now())
		w.mu.Unlock()
		if due && failures > 0 {
			wait = w.opts.RetryBackoff.Delay(failures - 1)
		} else if due {
			wait = 0
		}
		if !hasDoc {
			wait = time.Hour // until Publish wakes us
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-w.kick:
				t.Stop()
				continue
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		w.mu.Lock()
		heartbeat := w.latest != nil && !w.now().Before(w.nextHeartbeat)
		w.mu.Unlock()
		if _, err := w.push(ctx, heartbeat); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			failures++
		} else {
			failures = 0
		}
	}
}

func (w *Writer) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// prepare copies doc, fills in its identity and redacts it.
func (w *Writer) prepare(doc *status.ClusterStatus) (*status.ClusterStatus, error) {
	if doc == nil {
		return nil, fmt.Errorf("status %s: %w: nil document", w.opts.Cluster, status.ErrInvalidDocument)
	}
	if doc.Cluster != "" && doc.Cluster != w.opts.Cluster {
		return nil, fmt.Errorf("status %s: %w: the document names cluster %q", w.opts.Cluster, status.ErrInvalidDocument, doc.Cluster)
	}
	d := status.Normalized(doc)
	d.Cluster = w.opts.Cluster
	if w.opts.InstanceID != "" {
		d.InstanceID = w.opts.InstanceID
	}
	if d.Agent.Version == "" {
		d.Agent.Version = version.Version
	}
	d.HeartbeatInterval = &metav1.Duration{Duration: w.opts.HeartbeatInterval}
	status.RedactDocument(d)
	return d, nil
}

// push commits the latest document when it is owed, or when force is set.
func (w *Writer) push(ctx context.Context, force bool) (PublishResult, error) {
	w.pushMu.Lock()
	defer w.pushMu.Unlock()

	w.mu.Lock()
	if w.latest == nil || (!w.due && !force && w.now().Before(w.nextHeartbeat)) {
		w.mu.Unlock()
		return PublishResult{}, nil
	}
	doc := w.latest.DeepCopy()
	heartbeatOnly := !w.due
	w.mu.Unlock()

	now := w.now().UTC().Truncate(time.Second) // the document's resolution
	doc.Heartbeat = metav1.NewTime(now)
	data, err := status.Encode(doc)
	if err != nil {
		return PublishResult{}, err
	}
	start := time.Now()
	res, err := w.git.PushFiles(ctx, w.ref, map[string][]byte{status.FileName: data},
		commitMessage(doc, heartbeatOnly), gitrepo.Signature{Name: w.author, Email: w.email, When: now})
	w.metrics.observe(time.Since(start).Seconds(), pushResult(err))

	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastErr = err
	if err != nil {
		w.due = true
		w.metrics.setPending(true)
		return PublishResult{}, fmt.Errorf("status %s: %w", w.opts.Cluster, err)
	}
	w.committed = doc
	w.due = w.latest != nil && status.MeaningfullyChanged(doc, w.latest)
	w.nextHeartbeat = now.Add(w.jittered())
	w.metrics.setPending(w.due)
	return PublishResult{Pushed: !res.Unchanged, Heartbeat: heartbeatOnly, Commit: res.Hash, Squashed: res.Squashed}, nil
}

func (w *Writer) jittered() time.Duration {
	d := w.opts.HeartbeatInterval
	j := w.opts.HeartbeatJitter
	if j <= 0 {
		return d
	}
	return time.Duration(float64(d) * (1 - j + 2*j*rand.Float64()))
}

// commitMessage summarises the document in the commit's subject, so `git
// log` of a status ref reads like an event log.
func commitMessage(doc *status.ClusterStatus, heartbeat bool) string {
	if heartbeat {
		return fmt.Sprintf("heartbeat: %s", doc.Cluster)
	}
	ready, total, failing := 0, len(doc.Units), 0
	for _, u := range doc.Units {
		switch {
		case status.UnitReady(u):
			ready++
		case status.UnitFailing(u):
			failing++
		}
	}
	state := fmt.Sprintf("%d/%d units ready", ready, total)
	if failing > 0 {
		state += fmt.Sprintf(", %d failing", failing)
	}
	at := doc.AppliedRevision
	if at == "" {
		at = doc.DesiredRevision
	}
	if at != "" {
		state += " at " + status.ShortRevision(at)
	}
	return fmt.Sprintf("status: %s %s", doc.Cluster, state)
}
