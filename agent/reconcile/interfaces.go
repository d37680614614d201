package reconcile

import (
	"context"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/health"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Source is the fleet repo's checkout; *gitrepo.Source implements it.
type Source interface {
	// Sync brings the checkout up to date with the branch head
	// (errors.Is(err, gitrepo.ErrUnreachable) for an outage).
	Sync(ctx context.Context) (gitrepo.Result, error)
	// LastGood is the last synced checkout, also from a previous process.
	LastGood() (gitrepo.Result, bool)
}

// Follower names the ref a Source's last sync followed (*gitrepo.Source:
// the cluster's slice ref once published, else the branch), for the log.
type Follower interface {
	Following() string
	// AwaitingSlice: the Source would follow a slice ref but the remote
	// has none yet, so it fetches the whole branch.
	AwaitingSlice() bool
}

// Holder keeps a checkout on disk while it is held, whatever later syncs
// remove (*gitrepo.Source implements it): the loop holds its revision's
// checkout while it polls Git during health waits (watch.go).
type Holder interface {
	Hold(dir string) (release func())
}

// Checkouter gives the checkout of an older commit of the branch
// (*gitrepo.Source implements it): a Source that has it lets the loop
// restore the last accepted revision after a restart with an empty cache.
type Checkouter interface {
	Checkout(ctx context.Context, hash string) (gitrepo.Result, error)
}

// AcceptedStore keeps the last accepted revision in the cluster
// (*state.Store implements it), so that a restarted agent or a new leader
// goes on correcting drift from it while the head is refused or
// unreadable. LoadAccepted returns "" when none was recorded.
type AcceptedStore interface {
	LoadAccepted(ctx context.Context) (string, error)
	SaveAccepted(ctx context.Context, revision string) error
}

// Applier applies units to the cluster; *apply.Applier implements it.
type Applier interface {
	Apply(ctx context.Context, u apply.UnitRequest) (*apply.UnitResult, error)
	Check(ctx context.Context, unit string, obs *apply.Observation) (*apply.UnitCheck, error)
	CheckReady(ctx context.Context, unit string, checks *health.Checks) (bool, []string, error)
	// WaitReady waits for an applied unit's health (apply.Applier.WaitReady).
	WaitReady(ctx context.Context, unit string, timeout time.Duration, h apply.HealthOptions, waiting func([]string)) (bool, []string, error)
	Units(ctx context.Context) ([]string, error)
	// DeleteUnit removes a unit that left the slice, handing over what
	// owners says another unit claims.
	DeleteUnit(ctx context.Context, unit string, owners apply.Owners) (*apply.UnitResult, error)
	// ClaimedObjects is what a unit's inventory owns (apply.Owners).
	ClaimedObjects(ctx context.Context, unit string) (hash string, ids []object.ObjMetadata, complete bool, err error)
	Observe(ctx context.Context) (*apply.Observation, error)
}

// Verifier decides whether a fetched commit may be applied; commit
// signature verification (agent/verify) plugs in here. The loop has already
// checked that head is the configured branch's. An error refuses the
// commit: the loop keeps reconciling the last accepted revision and puts
// the error in status (reason VerificationFailed). The returned
// Verification, when not nil, goes to status as is.
type Verifier interface {
	Verify(ctx context.Context, head gitrepo.Result) (*status.Verification, error)
}

// VerifierFunc adapts a function to Verifier.
type VerifierFunc func(ctx context.Context, head gitrepo.Result) (*status.Verification, error)

// Verify calls f.
func (f VerifierFunc) Verify(ctx context.Context, head gitrepo.Result) (*status.Verification, error) {
	return f(ctx, head)
}

// StatusSink receives the status document after every cycle. Publish must
// not keep st: the loop reuses nothing, but a sink that stores it should
// store a copy it can own (st is not modified after Publish returns).
type StatusSink interface {
	Publish(ctx context.Context, st *status.ClusterStatus) error
}

// Discovery reports the live cluster's version and served APIs.
type Discovery interface {
	Discover(ctx context.Context) (ClusterInfo, error)
}

// ClusterInfo is what discovery found.
type ClusterInfo struct {
	// KubeVersion like "v1.36.3".
	KubeVersion string
	// GroupVersions served, like "v1" and "apps/v1", sorted.
	GroupVersions []string
	// Resources are "group/version/Kind" entries (".Capabilities.APIVersions.Has
	// "apps/v1/Deployment"" in Helm), sorted.
	Resources []string
	// Namespaced is every served kind's scope (true: namespaced), which
	// decides where a unit's namespace goes.
	Namespaced map[schema.GroupKind]bool
}
