package fleet

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
)

// APIVersion is the only apiVersion the fleet repo kinds accept.
const APIVersion = "flotilla.dev/v1alpha1"

// Kinds of the fleet repo.
const (
	KindCluster     = "Cluster"
	KindFleet       = "Fleet"
	KindApplication = "Application"
	KindGlobalJob   = "GlobalJob"
)

// TypeMeta is the apiVersion/kind header every document carries.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// ObjectMeta is deliberately smaller than Kubernetes' ObjectMeta: strict
// decoding rejects fields (uid, namespace, …) that mean nothing here.
type ObjectMeta struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Source locates the document a value was loaded from, for error messages.
type Source struct {
	File string `json:"-"` // slash-separated, relative to the repo root
	Line int    `json:"-"`
}

// Cluster is a member or edge cluster: clusters/<name>.yaml.
type Cluster struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     ClusterSpec `json:"spec,omitempty"`
	Source   Source      `json:"-"`
}

// ClusterSpec holds hints the hub uses before the cluster has reported status.
type ClusterSpec struct {
	// KubernetesVersion (e.g. v1.36.3) feeds Helm capabilities in plan until
	// the agent reports the live version.
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// APIVersions are extra group/versions (e.g. monitoring.coreos.com/v1)
	// Helm charts may test with .Capabilities.APIVersions.Has.
	APIVersions []string `json:"apiVersions,omitempty"`
	// Capacity is the allocatable hint (cpu, memory, nvidia.com/gpu) used by
	// GlobalJob placement until the agent reports a capacity snapshot.
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// StatusKeys are public keys (OpenPGP armored or SSH authorized_keys
	// lines) whose signatures make this cluster's status commits trusted.
	StatusKeys []string `json:"statusKeys,omitempty"`
	// Decommission removes every unit from the cluster and confirms to its
	// agent that pruning them all is intended; `flotilla cluster
	// decommission` sets it. Without it an agent holds such a prune.
	Decommission bool `json:"decommission,omitempty"`
	// SOPS says how SOPS-encrypted files reach this cluster.
	SOPS *ClusterSOPS `json:"sops,omitempty"`
}

// ClusterSOPS is the public half of the cluster's SOPS key.
type ClusterSOPS struct {
	// AgeRecipient (age1…) is the public key of the age identity the
	// cluster's agent holds in its Secret: files encrypted for it decrypt
	// on this cluster. `flotilla bootstrap --sops-age-key generate` sets it;
	// `flotilla secrets recipients` lists it for .sops.yaml.
	AgeRecipient string `json:"ageRecipient,omitempty"`
}

// Fleet is a group of clusters: fleets/<name>.yaml.
type Fleet struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     FleetSpec  `json:"spec"`
	Source   Source     `json:"-"`
	// Lines locates the fields of spec.workloadIdentity, for problems
	// found per cluster after loading.
	Lines FieldLines `json:"-"`
}

// FleetSpec selects members explicitly and/or by labels; a cluster matching
// either is a member.
type FleetSpec struct {
	Clusters []string              `json:"clusters,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Namespaces must exist identically on every member (namespace sameness).
	Namespaces  []NamespaceSpec `json:"namespaces,omitempty"`
	HealthCheck *HealthCheck    `json:"healthCheck,omitempty"`
	// Queues are Volcano queues created on every member.
	Queues []QueueSpec `json:"queues,omitempty"`
	// WorkloadIdentity maps ServiceAccounts on every member to cloud
	// roles, written as each member's provider expects.
	WorkloadIdentity []WorkloadIdentity `json:"workloadIdentity,omitempty"`
	// Rollout is the default rollout of the fleet's applications.
	Rollout *Rollout `json:"rollout,omitempty"`
	// HealthChecks are the default health checks of the applications
	// deployed to the fleet's members (an application's own check for
	// the same kind wins).
	HealthChecks []CustomHealthCheck `json:"healthChecks,omitempty"`
}

// NamespaceSpec is a namespace every fleet member gets.
type NamespaceSpec struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// HealthCheck says when a silent member is Unreachable: after
// Interval × FailureThreshold without a status heartbeat.
type HealthCheck struct {
	Interval         metav1.Duration `json:"interval,omitempty"`
	FailureThreshold int32           `json:"failureThreshold,omitempty"`
}

// CustomHealthCheck is a health rule for one kind (or, without kind,
// every kind of the apiVersion's group), with the fields and meaning of
// Flux's Kustomization spec.healthCheckExprs: CEL expressions over the
// object, evaluated inProgress, then failed, then current; when none is
// true the object is in progress.
type CustomHealthCheck struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind,omitempty"`
	Current    string `json:"current"`
	InProgress string `json:"inProgress,omitempty"`
	Failed     string `json:"failed,omitempty"`
}

// QueueSpec is a Volcano queue (scheduling.volcano.sh/v1beta1) declared for
// a fleet, with an optional per-cluster capability.
type QueueSpec struct {
	Name        string              `json:"name"`
	Weight      int32               `json:"weight,omitempty"`
	Reclaimable *bool               `json:"reclaimable,omitempty"`
	Capability  corev1.ResourceList `json:"capability,omitempty"`
	// ClusterCapability overrides Capability for the named clusters.
	ClusterCapability map[string]corev1.ResourceList `json:"clusterCapability,omitempty"`
}

// Application is something deployed to clusters: apps/<name>/app.yaml, with
// its sources beside it.
type Application struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta      `json:"metadata"`
	Spec     ApplicationSpec `json:"spec"`
	Source   Source          `json:"-"`
	// Lines locates every field, so problems only the compiler finds (a
	// dependsOn entry not deployed to the same cluster) name their line.
	Lines FieldLines `json:"-"`
}

// Line returns the line of field in the application's file, or of the
// document when the field's line is unknown (an Application built in code).
func (a *Application) Line(field string) int {
	if n := a.Lines.Line(field); n > 0 {
		return n
	}
	return a.Source.Line
}

// ApplicationSpec is one source, how to reconcile it, and where it goes.
type ApplicationSpec struct {
	Source AppSource `json:"source"`
	// Namespace is set on every namespaced object of the application (as
	// Flux's targetNamespace) and is the Helm release namespace.
	Namespace string `json:"namespace,omitempty"`
	// DependsOn names applications that must be Ready on a cluster before
	// this one is applied there.
	DependsOn []string `json:"dependsOn,omitempty"`
	// Prune deletes objects that left the source (default true).
	Prune *bool `json:"prune,omitempty"`
	// AllowEmpty lets an empty render prune everything the unit owns.
	AllowEmpty bool `json:"allowEmpty,omitempty"`
	// Wait waits for the objects to be Ready (default true).
	Wait *bool `json:"wait,omitempty"`
	// Timeout bounds apply plus health wait (default 5m).
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// FailFast ends the health wait at once when an object reports it
	// failed (default true); false waits until the timeout, for kinds
	// that recover on their own.
	FailFast *bool `json:"failFast,omitempty"`
	// HealthChecks judge kinds kstatus cannot read: Flux's
	// healthCheckExprs, unchanged.
	HealthChecks []CustomHealthCheck `json:"healthChecks,omitempty"`
	// SyncPolicies are the destinations and their per-destination overrides.
	SyncPolicies []SyncPolicy `json:"syncPolicies"`
	// Rollout overrides the rollout of the destinations' fleets.
	Rollout *Rollout `json:"rollout,omitempty"`
	// Suspend stops the agents applying and pruning the application: its
	// objects stay as they are until it is unsuspended. A sync policy's
	// suspend overrides it on that destination's clusters.
	Suspend bool `json:"suspend,omitempty"`
}

// AppSource has exactly one of Kustomize, Manifests or Helm. Paths are
// relative to the application's directory and may not leave the repo —
// or, with Git, relative to the vendored copy of the Git source.
type AppSource struct {
	Kustomize *PathSource `json:"kustomize,omitempty"`
	Manifests *PathSource `json:"manifests,omitempty"`
	Helm      *HelmSource `json:"helm,omitempty"`
	// Git is an external repository the hub vendors into
	// sources/<application>/ at render time (hub/gitsource); the other
	// field's path is then inside that copy.
	Git *GitSource `json:"git,omitempty"`
}

// GitSource is a directory of an external Git repository at a ref.
type GitSource struct {
	URL string `json:"url"`
	Ref GitRef `json:"ref"`
	// Path is the directory of the repository that is vendored (default:
	// the whole tree).
	Path string `json:"path,omitempty"`
}

// GitRef is exactly one of a branch, a tag or a full commit hash.
type GitRef struct {
	Branch string `json:"branch,omitempty"`
	Tag    string `json:"tag,omitempty"`
	Commit string `json:"commit,omitempty"`
}

// PathSource is a directory in the repo.
type PathSource struct {
	Path string `json:"path"`
}

// HelmSource is a chart from a chart repository (Repo, Chart, Version — a
// semver range is resolved and pinned when vendored) or from a path.
type HelmSource struct {
	Repo        string `json:"repo,omitempty"`
	Chart       string `json:"chart,omitempty"`
	Version     string `json:"version,omitempty"`
	Path        string `json:"path,omitempty"`
	ReleaseName string `json:"releaseName,omitempty"`
	// Values are the base values; destinations merge theirs on top.
	Values *runtime.RawExtension `json:"values,omitempty"`
}

// SyncPolicy is one destination and what changes there.
type SyncPolicy struct {
	Name        string      `json:"name,omitempty"`
	Destination Destination `json:"destination"`
	Overrides   *Overrides  `json:"overrides,omitempty"`
	// ReplicaScheduling divides a workload's replicas across the
	// destination's clusters (Karmada's Divided/Weighted).
	ReplicaScheduling *ReplicaScheduling `json:"replicaScheduling,omitempty"`
	// Suspend, when set, replaces the application's suspend on the
	// destination's clusters (by the precedence of sync policies).
	Suspend *bool `json:"suspend,omitempty"`
}

// Destination selects clusters by fleet, labels or names: one of them, or
// a fleet and a selector together, which selects the fleet's members the
// selector matches.
type Destination struct {
	Fleet    string                `json:"fleet,omitempty"`
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	Clusters []string              `json:"clusters,omitempty"`
}

// Overrides customise an application per destination. String values may
// use ${cluster.name} and ${cluster.labels.<key>}.
type Overrides struct {
	Namespace string     `json:"namespace,omitempty"`
	Patches   []Patch    `json:"patches,omitempty"`
	Images    []Image    `json:"images,omitempty"`
	Replicas  []Replicas `json:"replicas,omitempty"`
	// Values are Helm values merged over the application's values.
	Values *runtime.RawExtension `json:"values,omitempty"`
}

// Patch is a Kustomize patch: a strategic-merge patch or a JSON6902 patch
// (a YAML/JSON list of operations), applied to the objects Target selects.
type Patch struct {
	Patch  string       `json:"patch"`
	Target *PatchTarget `json:"target,omitempty"`
}

// PatchTarget selects objects as Kustomize's patch target does.
type PatchTarget struct {
	Group              string `json:"group,omitempty"`
	Version            string `json:"version,omitempty"`
	Kind               string `json:"kind,omitempty"`
	Name               string `json:"name,omitempty"`
	Namespace          string `json:"namespace,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
	AnnotationSelector string `json:"annotationSelector,omitempty"`
}

// Image overrides a container image as Kustomize's images field does.
type Image struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// Replicas sets a workload's replica count on the destination's clusters.
type Replicas struct {
	Name  string `json:"name"`
	Count int32  `json:"count"`
}

// Replica division, as Karmada names it.
const (
	ReplicaSchedulingDivided  = "Divided"
	ReplicaDivisionWeighted   = "Weighted"
	GlobalJobPlacementDivided = "Divided"
	GlobalJobPlacementBestFit = "BestFit"
)

// ReplicaScheduling splits Replicas of the workload named by Target across
// the destination's clusters by static weights (largest remainder, ties by
// cluster name). A destination cluster without a weight gets weight 0.
type ReplicaScheduling struct {
	ReplicaSchedulingType     string           `json:"replicaSchedulingType,omitempty"`
	ReplicaDivisionPreference string           `json:"replicaDivisionPreference,omitempty"`
	Target                    WorkloadRef      `json:"target"`
	Replicas                  int32            `json:"replicas"`
	WeightPreference          WeightPreference `json:"weightPreference"`
}

// WorkloadRef names a workload (Deployment by default) in the source.
type WorkloadRef struct {
	Kind string `json:"kind,omitempty"`
	Name string `json:"name"`
}

// WeightPreference holds the static weights.
type WeightPreference struct {
	StaticWeightList []StaticClusterWeight `json:"staticWeightList"`
}

// StaticClusterWeight gives the named clusters a weight.
type StaticClusterWeight struct {
	TargetCluster ClusterAffinity `json:"targetCluster"`
	Weight        int64           `json:"weight"`
}

// ClusterAffinity names clusters, as in Karmada.
type ClusterAffinity struct {
	ClusterNames []string `json:"clusterNames"`
}

// GlobalJob is a Volcano Job placed on fleet clusters by the hub:
// jobs/<name>.yaml.
type GlobalJob struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta    `json:"metadata"`
	Spec     GlobalJobSpec `json:"spec"`
	Source   Source        `json:"-"`
}

// GlobalJobSpec is a Volcano Job template and where it runs.
type GlobalJobSpec struct {
	// Namespace the Job is created in on each cluster (default "default").
	Namespace string                `json:"namespace,omitempty"`
	Template  batchv1alpha1.JobSpec `json:"template"`
	Placement JobPlacement          `json:"placement"`
	// Recreate deletes and recreates a running job whose spec changed in Git;
	// by default a running job is left as is and the change is reported.
	Recreate bool `json:"recreate,omitempty"`
}

// JobPlacement chooses clusters for a GlobalJob: Divided splits each task's
// replicas by static weights; BestFit picks the one cluster whose reported
// capacity fits the whole gang.
type JobPlacement struct {
	Type             string                `json:"type"`
	Destination      Destination           `json:"destination"`
	StaticWeightList []StaticClusterWeight `json:"staticWeightList,omitempty"`
}

// Repo is a loaded, validated fleet repo. Slices are sorted by name.
type Repo struct {
	Root         string
	Clusters     []*Cluster
	Fleets       []*Fleet
	Applications []*Application
	GlobalJobs   []*GlobalJob
	// TrafficRoutes and FleetPolicies are sorted by name too.
	TrafficRoutes []*TrafficRoute
	FleetPolicies []*FleetPolicy
	// Providers and Alerts configure notifications; sorted by name.
	Providers []*Provider
	Alerts    []*Alert
	// Warnings are problems that do not stop a render (e.g. a selector that
	// matches no cluster), each naming file, line and field.
	Warnings []*FieldError

	// index caches name lookups and fleet membership; built by Load.
	index *repoIndex
}
