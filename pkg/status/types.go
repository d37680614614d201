package status

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Document identity.
const (
	APIVersion = "flotilla.dev/v1alpha1"
	// APIVersionV1Alpha2 adds instanceID. A document is written at the
	// oldest version that can carry it (see Encode), so a hub that reads
	// only v1alpha1 still reads agents that set no instance, and says
	// ErrUnsupportedVersion, not an unknown field, for those that do.
	APIVersionV1Alpha2 = "flotilla.dev/v1alpha2"
	// APIVersionV1Alpha3 adds progress; a document carries it only while
	// a long cycle runs, so most documents stay at an older version.
	APIVersionV1Alpha3 = "flotilla.dev/v1alpha3"
	// APIVersionV1Alpha4 adds the units' readyHash, readySince and
	// readyHashes, which rollouts measure bake and choose abort targets by.
	APIVersionV1Alpha4 = "flotilla.dev/v1alpha4"
	Kind               = "ClusterStatus"
	// FileName is the only file a status commit may change.
	FileName = "status.yaml"
	// RefPrefix is followed by the cluster name.
	RefPrefix = "refs/heads/flotilla/status/"
)

// Condition types and reasons, as Flux names them.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	// ConditionPruneHeld: units left the slice but too many to prune
	// without the cluster's decommission marker; they are kept.
	ConditionPruneHeld = "PruneHeld"

	ReasonSucceeded          = "ReconciliationSucceeded"
	ReasonProgressing        = "Progressing"
	ReasonRenderFailed       = "RenderFailed"
	ReasonApplyFailed        = "ApplyFailed"
	ReasonPruneFailed        = "PruneFailed"
	ReasonHealthCheckFailed  = "HealthCheckFailed"
	ReasonDependencyNotReady = "DependencyNotReady"
	ReasonGitOperationFailed = "GitOperationFailed"
	ReasonVerificationFailed = "VerificationFailed"
	// ReasonSourceStale: a unit's sources in Git do not match the hash its
	// slice records (pushed without re-rendering); the unit is refused.
	ReasonSourceStale = "SourceStale"
	// ReasonHookFailed: a Helm hook of the unit failed or did not finish;
	// it runs again only at a new revision of the unit.
	ReasonHookFailed = "HookFailed"
	// ReasonAwaitingDecommission: a held prune waits for the marker.
	ReasonAwaitingDecommission = "AwaitingDecommission"
	// ReasonDecryptionFailed: a SOPS-encrypted file of the unit could not
	// be decrypted (no matching age key on this cluster, or it was altered);
	// the message names the file. The unit keeps its last applied state
	// and is retried every interval: adding the key to the cluster fixes it.
	ReasonDecryptionFailed = "DecryptionFailed"
	// ReasonConflict: an object of the unit belongs to another unit that
	// still renders it; it was not taken over, the rest was applied.
	ReasonConflict = "Conflict"
	// ReasonSuspended: the unit is suspended in the fleet repo; the agent
	// neither applies nor prunes it (UnitStatus.Suspended).
	ReasonSuspended = "Suspended"
	// ReasonSuperseded: a newer revision that changes the unit arrived
	// while the agent waited for the unit's health; the wait ended and the
	// agent moved on to the newer revision. Neither Ready nor a failure: a
	// rollout does not count it, and a canary's bake starts over at the
	// newer content.
	ReasonSuperseded = "Superseded"
)

// DefaultHeartbeatInterval is how often an agent commits its status when
// nothing changed; the hub judges a document stale by it when the document
// does not say its own interval.
const DefaultHeartbeatInterval = 10 * time.Minute

// RefFor is the status ref of a cluster.
func RefFor(cluster string) string { return RefPrefix + cluster }

// ClusterStatus is status.yaml: what one agent last did on its cluster.
type ClusterStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Cluster    string `json:"cluster"`
	// InstanceID identifies the cluster instance the agent runs in (the UID
	// of its kube-system namespace), so two agents configured with the same
	// cluster name cannot overwrite each other's status unnoticed. v1alpha2.
	InstanceID string `json:"instanceID,omitempty"`
	Agent      Agent  `json:"agent"`
	// KubernetesVersion is the live API server's version (feeds plan's
	// Helm capabilities), APIVersions its served group/versions.
	KubernetesVersion string   `json:"kubernetesVersion,omitempty"`
	APIVersions       []string `json:"apiVersions,omitempty"`
	// DesiredRevision is the branch head the agent last saw
	// (main@sha1:<hash>); FetchedRevision the one it has on disk.
	DesiredRevision string `json:"desiredRevision,omitempty"`
	FetchedRevision string `json:"fetchedRevision,omitempty"`
	// AppliedRevision is set when every unit is applied at DesiredRevision.
	AppliedRevision string             `json:"appliedRevision,omitempty"`
	Conditions      []metav1.Condition `json:"conditions,omitempty"`
	Verification    *Verification      `json:"verification,omitempty"`
	Units           []UnitStatus       `json:"units,omitempty"`
	Jobs            []JobStatus        `json:"jobs,omitempty"`
	Capacity        *Capacity          `json:"capacity,omitempty"`
	// LastError is the latest loop-level error (fetch, verify, slice),
	// redacted.
	LastError string `json:"lastError,omitempty"`
	// Heartbeat is when the agent last confirmed it is alive; it alone
	// never makes a document "meaningfully changed".
	Heartbeat metav1.Time `json:"heartbeat"`
	// HeartbeatInterval is the writer's heartbeat period (before jitter),
	// so the hub can tell when a fleet's healthCheck is shorter than it.
	HeartbeatInterval *metav1.Duration `json:"heartbeatInterval,omitempty"`
	// Progress is what the cycle running when the document was published
	// was doing; nil in a cycle's result. The agent publishes it with
	// heartbeats while a cycle runs, on top of the last cycle's result.
	// v1alpha3.
	Progress *Progress `json:"progress,omitempty"`
}

// Progress is a running cycle's progress.
type Progress struct {
	// Phase of the cycle: fetch, units, prune or status.
	Phase string `json:"phase"`
	// Started is when the cycle started.
	Started metav1.Time `json:"started"`
	// Units being reconciled (rendered, applied, waited for) now, by name.
	Units []UnitProgress `json:"units,omitempty"`
}

// UnitProgress is a unit the running cycle is working on.
type UnitProgress struct {
	Name  string      `json:"name"`
	Since metav1.Time `json:"since"`
}

// Cycle phases, the values of Progress.Phase.
const (
	PhaseFetch  = "fetch"
	PhaseUnits  = "units"
	PhasePrune  = "prune"
	PhaseStatus = "status"
)

// String says what the cycle is doing, e.g. "units: web since
// 2026-01-02T03:04:05Z (cycle started 2026-01-02T03:04:00Z)".
func (p *Progress) String() string {
	if p == nil {
		return ""
	}
	s := p.Phase
	for i, u := range p.Units {
		if i == 3 {
			s += fmt.Sprintf(" and %d more", len(p.Units)-i)
			break
		}
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		s += sep + u.Name + " since " + u.Since.UTC().Format(time.RFC3339)
	}
	return s + " (cycle started " + p.Started.UTC().Format(time.RFC3339) + ")"
}

// Agent identifies the writer.
type Agent struct {
	Version string `json:"version"`
	// Identity is the leader's pod (or host) name.
	Identity string `json:"identity,omitempty"`
}

// Verification is the outcome of commit signature verification.
type Verification struct {
	Mode     string `json:"mode"`
	Verified bool   `json:"verified"`
	Signer   string `json:"signer,omitempty"`
	Message  string `json:"message,omitempty"`
}

// UnitStatus is one unit's last reconcile.
type UnitStatus struct {
	Name            string             `json:"name"`
	Hash            string             `json:"hash,omitempty"`
	AppliedRevision string             `json:"appliedRevision,omitempty"`
	Conditions      []metav1.Condition `json:"conditions,omitempty"`
	Objects         int                `json:"objects"`
	// DriftCorrections counts objects re-applied because someone changed
	// them in the cluster, since the agent started.
	DriftCorrections int64  `json:"driftCorrections,omitempty"`
	LastError        string `json:"lastError,omitempty"`
	// Suspended: the slice suspends the unit; its objects are left as
	// they were at AppliedRevision (not applied, pruned or corrected).
	Suspended bool `json:"suspended,omitempty"`
	// ReadyHash and ReadySince: the unit has been Ready at content hash
	// ReadyHash, without a break, since ReadySince. Set when the unit
	// becomes Ready at Hash, cleared when it stops being Ready or its
	// hash changes: a rollout's bake is measured from it, not from the
	// Ready condition, whose transition time does not move when a Ready
	// unit gets new content. v1alpha4.
	ReadyHash  string       `json:"readyHash,omitempty"`
	ReadySince *metav1.Time `json:"readySince,omitempty"`
	// ReadyHashes are the content hashes the unit has been Ready at on
	// this cluster, most recent first (Hash first once it has been
	// Ready), at most MaxReadyHashes, since the agent started: rollout
	// abort returns a cluster to the newest of them that is not the
	// revision aborted. v1alpha4.
	ReadyHashes []string `json:"readyHashes,omitempty"`
}

// MaxReadyHashes bounds UnitStatus.ReadyHashes.
const MaxReadyHashes = 4

// HasReadiness reports whether the unit carries the v1alpha4 readiness
// fields, which an older agent does not write.
func (u UnitStatus) HasReadiness() bool {
	return u.ReadyHash != "" || u.ReadySince != nil || len(u.ReadyHashes) > 0
}

// JobStatus is a Volcano job's outcome on this cluster.
type JobStatus struct {
	Name           string       `json:"name"`
	Namespace      string       `json:"namespace"`
	Unit           string       `json:"unit"`
	SpecHash       string       `json:"specHash,omitempty"`
	Phase          string       `json:"phase"`
	PodGroupPhase  string       `json:"podGroupPhase,omitempty"`
	Running        int32        `json:"running"`
	Succeeded      int32        `json:"succeeded"`
	Failed         int32        `json:"failed"`
	Preflight      string       `json:"preflight,omitempty"` // Fits, Waiting, Unschedulable
	Message        string       `json:"message,omitempty"`
	StartTime      *metav1.Time `json:"startTime,omitempty"`
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// Capacity is a snapshot the hub uses for GlobalJob placement.
type Capacity struct {
	ReadyNodes  int               `json:"readyNodes"`
	Allocatable map[string]string `json:"allocatable,omitempty"` // cpu, memory, nvidia.com/gpu (quantities)
	// Free is allocatable minus requests of running pods.
	Free   map[string]string `json:"free,omitempty"`
	Queues []QueueCapacity   `json:"queues,omitempty"`
}

// QueueCapacity is a Volcano queue's capability and current allocation.
type QueueCapacity struct {
	Name       string            `json:"name"`
	State      string            `json:"state,omitempty"`
	Capability map[string]string `json:"capability,omitempty"`
	Allocated  map[string]string `json:"allocated,omitempty"`
}
