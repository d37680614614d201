package apply

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/health"
)

// Options configure an Applier. Client QPS and burst are the caller's, on
// the rest.Config its Clients were built from.
type Options struct {
	// FieldManager for server-side apply; default "flotilla".
	FieldManager string
	// InventoryNamespace holds the inventory ConfigMaps (the agent's
	// namespace). Required; it must exist.
	InventoryNamespace string
	// Cluster is recorded in each inventory for people reading it.
	Cluster string
	// Concurrency bounds the parallel reads and dry-runs within one unit;
	// default 4. Callers parallelise across units themselves.
	Concurrency int
	// RequestTimeout bounds each API request; default 30s.
	RequestTimeout time.Duration
	// DefaultTimeout is the health and staging timeout of a unit that sets
	// none; default 5m.
	DefaultTimeout time.Duration
	// PollInterval of kstatus health checks; default 1s.
	PollInterval time.Duration
	// WaitReport is how often a unit waiting for health or a hook tells
	// UnitRequest.Waiting what it waits for; default 10s.
	WaitReport time.Duration
	// TakeOver are the field managers whose fields an object applied
	// again takes over (takeover.go); DefaultTakeOver when nil, none when
	// empty but not nil.
	TakeOver []ssa.FieldManager
}

func (o *Options) setDefaults() {
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	if o.Concurrency < 1 {
		o.Concurrency = 4
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = 5 * time.Minute
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.WaitReport <= 0 {
		o.WaitReport = 10 * time.Second
	}
	if o.TakeOver == nil {
		o.TakeOver = DefaultTakeOver
	}
}

// Applier applies units to one cluster. It caches inventories in memory
// (they are re-read after a restart) and is safe for concurrent use; calls
// for the same unit are serialised.
type Applier struct {
	opts   Options
	client client.Client
	raw    rest.Interface // server-side apply requests, see serverSideApply
	rm     *ssa.ResourceManager
	// disc lists the resource types a Namespace may hold (namespace.go).
	disc discovery.CachedDiscoveryInterfaceWithContext

	// poller builds the kstatus pollers of health waits (health.go).
	poller func(*health.Checks) *polling.StatusPoller

	mu          sync.Mutex
	inventories map[string]*Inventory // loaded or written
	// listed: Units read every inventory, so a unit absent from the cache
	// has none and needs no read.
	listed    bool
	unitLocks map[string]*sync.Mutex
	// seq numbers inventory writes, so an Observation can tell whether it
	// predates a unit's last apply.
	seq atomic.Uint64
}

// New builds an Applier with Clients of its own for cfg (wrap cfg with a
// WriteCounter first to count requests); a process that has Clients for
// the cluster already uses NewWithClients.
func New(cfg *rest.Config, opts Options) (*Applier, error) {
	c, err := NewClients(cfg, nil)
	if err != nil {
		return nil, err
	}
	return NewWithClients(c, opts)
}

// NewWithClients builds an Applier on c, as ssa.NewResourceManager takes a
// client: it reads, writes and maps kinds through c and opens no
// connection of its own.
func NewWithClients(c *Clients, opts Options) (*Applier, error) {
	opts.setDefaults()
	if opts.InventoryNamespace == "" {
		return nil, fmt.Errorf("%w: InventoryNamespace is required", ErrInvalid)
	}
	if c == nil || c.Client == nil || c.Config == nil || c.HTTPClient == nil {
		return nil, fmt.Errorf("%w: Clients from NewClients are required", ErrInvalid)
	}
	raw, err := newRawClient(c.Config, c.HTTPClient)
	if err != nil {
		return nil, fmt.Errorf("rest client: %w", err)
	}
	poller := func(checks *health.Checks) *polling.StatusPoller {
		return polling.NewStatusPoller(c.Client, c.Client.RESTMapper(), polling.Options{
			CustomStatusReaders: checks.StatusReaders(c.Client.RESTMapper()),
		})
	}
	return &Applier{
		opts:        opts,
		client:      c.Client,
		raw:         raw,
		disc:        c.Discovery,
		poller:      poller,
		rm:          ssa.NewResourceManager(c.Client, poller(nil), ssa.Owner{Field: opts.FieldManager, Group: "flotilla.dev"}),
		inventories: map[string]*Inventory{},
		unitLocks:   map[string]*sync.Mutex{},
	}, nil
}

// UnitRequest is one unit to apply.
type UnitRequest struct {
	Name string
	// Revision (e.g. "main@sha1:…") is recorded when the inventory changes.
	Revision string
	// Hash is the unit's content hash from the slice; an equal hash in the
	// inventory lets unchanged objects skip re-apply when they have not
	// drifted. Empty disables that shortcut (content hashes still apply).
	Hash    string
	Objects []*unstructured.Unstructured
	// Prune deletes objects of the previous apply that are no longer
	// rendered.
	Prune bool
	// AllowEmpty accepts an empty Objects (then pruning everything when
	// Prune); otherwise an empty unit fails with ErrEmpty.
	AllowEmpty bool
	// Wait for every object to be kstatus Current within Timeout.
	Wait    bool
	Timeout time.Duration
	// Force re-applies every object, skipping the unchanged shortcut.
	Force bool
	// RecreateImmutable deletes and recreates an object whose apply is
	// rejected for changing an immutable field.
	RecreateImmutable bool
	// CreateOnly creates missing objects and never updates existing ones,
	// nor re-creates one the inventory records as applied (a completed
	// job is not re-run).
	CreateOnly bool
	// Observed, from Observe, replaces per-object reads of the drift
	// check; optional.
	Observed *Observation
	// Hooks are the unit's Helm hooks: pre-install/pre-upgrade ones run
	// before anything is applied, post-install/post-upgrade ones once the
	// unit is Ready, once per Hash (see hooks.go). They are not part of
	// the inventory's objects.
	Hooks []Hook
	// Health says how the wait judges objects and when it ends early.
	Health HealthOptions
	// Waiting, when set, is told every Options.WaitReport while the unit
	// waits for health or a hook which objects are not ready and why
	// ("Deployment/ns/web: InProgress: Available: 2/3"), so a long wait
	// says what it waits for. It is called from another goroutine.
	Waiting func(notReady []string)
	// Owners says which units claim an object at this revision
	// (ownership.go); nil judges other units by their inventories and
	// releases nothing.
	Owners Owners
}

// UnitResult says what Apply did. It is returned (partially filled) with
// errors too.
type UnitResult struct {
	Unit string
	// Skipped: nothing needed a write (unchanged unit, no drift, nothing to
	// prune); no mutating request was made.
	Skipped bool
	// Object counts of this apply.
	Created, Configured, Unchanged int
	// Disabled counts objects left alone for reconcile: disabled.
	Disabled int
	// ChangeSet has one entry per rendered object (created, configured,
	// unchanged or skipped).
	ChangeSet []ssa.ChangeSetEntry
	// DriftCorrected counts objects whose content had not changed but
	// whose live state had drifted, and that this apply restored.
	DriftCorrected int
	// Pruned were deleted; PruneKept were left because they lost our
	// ownership labels or disable pruning; PruneFailed stay in the
	// inventory for the next attempt; Orphaned are no longer rendered but
	// left because the unit does not prune. All as Kind/namespace/name.
	Pruned, PruneKept, PruneFailed, Orphaned []string
	// KeptNamespaces says, per Namespace in PruneKept because it still
	// holds an object Flotilla does not manage, which one.
	KeptNamespaces []string
	// Ready: with Wait, every object reached kstatus Current; without, the
	// apply succeeded.
	Ready bool
	// NotReady names objects that were not Ready, with their status.
	NotReady []string
	// ManagedObjects counts the objects the unit's inventory now owns.
	ManagedObjects int
	// Conflicts were not applied: another unit owns them and still
	// claims them ("Kind/namespace/name belongs to unit X"); the apply
	// then fails with ErrConflict. TakenOver were owned by a unit that no
	// longer claims them ("… from unit X"); HandedOver left this unit's
	// inventory without a delete for the unit that now claims them ("…
	// to unit X").
	Conflicts, TakenOver, HandedOver []string
}

// Applied is the number of objects written (created or configured).
func (r *UnitResult) Applied() int { return r.Created + r.Configured }

func (a *Applier) lockUnit(unit string) func() {
	a.mu.Lock()
	l, ok := a.unitLocks[unit]
	if !ok {
		l = &sync.Mutex{}
		a.unitLocks[unit] = l
	}
	a.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (a *Applier) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.opts.RequestTimeout)
}

func (a *Applier) timeout(unit time.Duration) time.Duration {
	if unit > 0 {
		return unit
	}
	return a.opts.DefaultTimeout
}

// work is one rendered object's fate during Apply.
type work struct {
	d    *desired
	prev *Entry // previous inventory entry, if any
	// entry is the inventory entry to record; nil keeps prev (or Pending
	// for a new object).
	entry *Entry
	// drift: content unchanged, live drifted; re-applied.
	drift bool
	// replaced by repairAndDryRun (replace): written even when the apply after
	// it changes nothing.
	replaced bool
	// live is the live metadata when plan read it.
	live *liveMeta
	// conflict: another unit owns the object (ownership.go).
	conflict bool
}

// Apply applies one unit: see the package documentation. Its error is a
// *status.Failure that names the condition reason.
func (a *Applier) Apply(ctx context.Context, u UnitRequest) (*UnitResult, error) {
	res, err := a.applyUnit(ctx, u)
	return res, failureOf(err)
}

func (a *Applier) applyUnit(ctx context.Context, u UnitRequest) (*UnitResult, error) {
	res := &UnitResult{Unit: u.Name}
	if err := validateUnitName(u.Name); err != nil {
		return res, err
	}
	defer a.lockUnit(u.Name)()

	ds, err := prepare(u.Name, u.Objects, a.client.RESTMapper())
	if err != nil {
		return res, fmt.Errorf("unit %s: %w", u.Name, err)
	}
	if len(ds) == 0 && !u.AllowEmpty {
		return res, fmt.Errorf("unit %s: %w", u.Name, ErrEmpty)
	}
	prev, err := a.loadInventory(ctx, u.Name)
	if err != nil {
		return res, err
	}
	// A failed pre hook stops the unit before anything is applied.
	if prev, err = a.preHooks(ctx, u, prev); err != nil {
		return res, fmt.Errorf("unit %s: %w", u.Name, err)
	}

	works, toApply, err := a.plan(ctx, u, ds, prev, res)
	if err != nil {
		return res, fmt.Errorf("unit %s: %w", u.Name, err)
	}
	toApply, conflicts, err := a.claimConflicts(ctx, u, prev, toApply, res)
	if err != nil {
		return res, fmt.Errorf("unit %s: %w", u.Name, err)
	}
	desiredIDs := make(map[object.ObjMetadata]bool, len(ds))
	for _, d := range ds {
		desiredIDs[d.id] = true
	}
	var stale []Entry
	for _, e := range prev.Entries {
		if !desiredIDs[e.ID] {
			stale = append(stale, e)
		}
	}

	// Stale objects another unit now renders are handed over, not pruned;
	// held ones (whose claimant could not be told) stay for the next apply.
	var held []Entry
	var releaseErr error
	if u.Prune {
		stale, held, releaseErr = a.release(ctx, u.Name, u.Owners, stale, res)
	}

	if len(toApply) == 0 && len(stale) == 0 && len(held) == 0 && len(conflicts) == 0 && len(res.HandedOver) == 0 &&
		prev.appliedAt(u.Hash, u.Prune) {
		res.Skipped = true
		res.ManagedObjects = len(prev.IDs(Applied))
		if err := a.finishHealth(ctx, u, ds, res); err != nil {
			return res, err
		}
		if err := a.postHooks(ctx, u, res); err != nil {
			return res, fmt.Errorf("unit %s: %w", u.Name, err)
		}
		return res, nil
	}

	// A unit without an inventory whose objects do not exist yet is
	// created without dry-runs; a failure deletes what this call created.
	// Anything else is validated by dry-run, stage by stage, first.
	direct := false
	if prev.resourceVersion == "" || len(prev.Entries) == 0 {
		if direct, err = a.allAbsent(ctx, toApply); err != nil {
			return res, fmt.Errorf("unit %s: %w", u.Name, err)
		}
	}
	// Record new ids before creating anything: an agent killed from here
	// on still finds them in the inventory and prunes them if need be.
	if next := withPending(prev, toApply); next != nil {
		// With the prune flag being applied: a unit killed during its
		// first apply and then removed from the slice must still be
		// pruned (a new inventory's zero value would orphan it).
		next.Prune = u.Prune
		if err := a.storeInventory(ctx, next); err != nil {
			return res, err
		}
		prev = next
	}

	errs := append([]error(nil), conflicts...)
	if releaseErr != nil {
		errs = append(errs, releaseErr)
	}
	applyErr := a.applyStages(ctx, u, toApply, direct, res)
	if applyErr != nil {
		errs = append(errs, applyErr)
	}

	// Prune only after a complete apply: a half-applied unit keeps
	// everything it had.
	var keepStale []Entry
	switch {
	case applyErr != nil:
		keepStale = stale
	case u.Prune:
		var pruneErr error
		keepStale, pruneErr = a.prune(ctx, u.Name, stale, res)
		if pruneErr != nil {
			errs = append(errs, pruneErr)
		}
	default:
		for _, e := range stale {
			res.Orphaned = append(res.Orphaned, e.Subject())
		}
	}
	keepStale = append(keepStale, held...)

	next := &Inventory{
		Unit: u.Name, Cluster: a.opts.Cluster, Revision: prev.Revision, Hash: u.Hash, Prune: u.Prune,
		Hooks: prev.Hooks, resourceVersion: prev.resourceVersion,
	}
	if applyErr != nil || len(conflicts) > 0 {
		// The unchanged shortcut must not trust a hash whose apply failed.
		next.Hash = prev.Hash
	}
	for _, w := range works {
		switch {
		case w.entry != nil:
			next.Entries = append(next.Entries, *w.entry)
		case w.prev != nil:
			next.Entries = append(next.Entries, *w.prev)
		case !w.d.gitDisabled && !w.conflict:
			// Not applied (an earlier failure) and new: keep it pending.
			next.Entries = append(next.Entries, Entry{ID: w.d.id, Version: w.d.version, State: Pending})
		}
	}
	for _, e := range keepStale {
		e.State = Stale
		next.Entries = append(next.Entries, e)
	}
	sortEntries(next.Entries)
	if !sameInventory(prev, next) {
		next.Revision = u.Revision
		if err := a.storeInventory(ctx, next); err != nil {
			errs = append(errs, err)
		}
	}
	res.ManagedObjects = len(next.IDs(Applied))

	if applyErr == nil {
		if err := a.finishHealth(ctx, u, ds, res); err != nil {
			errs = append(errs, err)
		} else if len(errs) == 0 {
			// Post hooks once the unit is Ready.
			if err := a.postHooks(ctx, u, res); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("unit %s: %w", u.Name, errors.Join(errs...))
	}
	return res, nil
}
