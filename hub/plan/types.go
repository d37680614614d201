package plan

import (
	"bytes"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Identity of the JSON document.
const (
	APIVersion = "flotilla.dev/v1alpha1"
	Kind       = "Plan"
)

// Change says what happens to a cluster, unit or object.
type Change string

const (
	Added   Change = "added"
	Removed Change = "removed"
	Changed Change = "changed"
)

// Plan is what merging head into base changes on every cluster. It is also
// the -o json document (see the package doc for the schema).
type Plan struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Base       Revision `json:"base"`
	Head       Revision `json:"head"`
	// Summary counts every cluster of Clusters.
	Summary Counts `json:"summary"`
	// Notes say in words what moved between clusters: replica divisions
	// and Volcano job placements.
	Notes []string `json:"notes"`
	// Ownership says in words which objects change units within a
	// cluster (handed over without a delete) and which applications'
	// copies of fleet namespaces the change leaves out.
	Ownership []string `json:"ownership,omitempty"`
	// Warnings do not change the exit code (a stale rendered/ at head,
	// an untrusted status document, a base unit that failed to render).
	Warnings []string `json:"warnings"`
	// Clusters with at least one change, sorted by name.
	Clusters []ClusterPlan `json:"clusters"`
	// Failed is true when some unit failed to render at head: the plan is
	// incomplete and the agent would fail on that unit too.
	Failed bool  `json:"failed"`
	Stats  Stats `json:"stats"`
}

// Stats say how much rendering the plan took.
type Stats struct {
	// UnitsCompared are the units present on either side of the planned
	// clusters.
	UnitsCompared int `json:"unitsCompared"`
	// UnitsRendered counts renders: a unit whose hash differs renders on
	// both sides, one with the same hash on neither.
	UnitsRendered int `json:"unitsRendered"`
}

// Revision is one side of the plan.
type Revision struct {
	// Ref is what the user named ("origin/main"), or "working tree".
	Ref string `json:"ref"`
	// Commit is the full hash; empty for the working tree.
	Commit string `json:"commit,omitempty"`
}

// Counts are units and objects added, removed and changed.
type Counts struct {
	Clusters       int `json:"clusters"`
	UnitsAdded     int `json:"unitsAdded"`
	UnitsRemoved   int `json:"unitsRemoved"`
	UnitsChanged   int `json:"unitsChanged"`
	ObjectsAdded   int `json:"objectsAdded"`
	ObjectsRemoved int `json:"objectsRemoved"`
	ObjectsChanged int `json:"objectsChanged"`
}

func (c *Counts) add(o Counts) {
	c.Clusters += o.Clusters
	c.UnitsAdded += o.UnitsAdded
	c.UnitsRemoved += o.UnitsRemoved
	c.UnitsChanged += o.UnitsChanged
	c.ObjectsAdded += o.ObjectsAdded
	c.ObjectsRemoved += o.ObjectsRemoved
	c.ObjectsChanged += o.ObjectsChanged
}

// Empty reports whether nothing changes.
func (p *Plan) Empty() bool { return len(p.Clusters) == 0 }

// ClusterPlan is one cluster's changes.
type ClusterPlan struct {
	Name string `json:"name"`
	// Change is added (a new cluster), removed (it left the repo or every
	// fleet) or changed.
	Change Change `json:"change"`
	// Capabilities the units were rendered with, and where they came from.
	Capabilities Capabilities `json:"capabilities"`
	Counts       Counts       `json:"counts"`
	// Units that change, in the head slice's order (removed units last).
	Units []UnitPlan `json:"units"`
}

// Capabilities are the Helm capabilities of a cluster's renders.
type Capabilities struct {
	KubeVersion string `json:"kubeVersion,omitempty"`
	// APIVersions is how many extra API versions were given (the list
	// itself is long and not interesting in a review).
	APIVersions int `json:"apiVersions"`
	// Source is "status" (the agent's latest status document), "cluster"
	// (clusters/<name>.yaml) or "default" (render.DefaultKubeVersion and
	// Helm's built-in API versions).
	Source string `json:"source"`

	list []string
}

// Capability sources.
const (
	FromStatus  = "status"
	FromCluster = "cluster"
	FromDefault = "default"
)

// UnitPlan is one unit's changes.
type UnitPlan struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Change Change `json:"change"`
	// BaseHash and HeadHash are the slice's content hashes.
	BaseHash string `json:"baseHash,omitempty"`
	HeadHash string `json:"headHash,omitempty"`
	// Settings are changes of how the unit is applied (prune, wait,
	// timeout, dependsOn, namespace), like "prune: true → false".
	Settings []string     `json:"settings,omitempty"`
	Objects  []ObjectPlan `json:"objects"`
	// Hooks are the Helm hooks that change, compared like Objects: the
	// agent runs them around the unit's apply (ObjectPlan.Hook says when),
	// never as the unit's objects. Not in Counts.
	Hooks []ObjectPlan `json:"hooks,omitempty"`
	// Error is set when the unit failed to render at head (the agent will
	// fail on it too); its objects are then unknown.
	Error string `json:"error,omitempty"`
	// BaseError is set when the unit failed to render at base; every head
	// object then counts as added.
	BaseError string `json:"baseError,omitempty"`
	// Suspended: the head slice suspends the unit; the agent applies none
	// of these changes (and prunes nothing) until it is unsuspended.
	Suspended bool `json:"suspended,omitempty"`
	// InputsOnly: the unit's content hash changed but no object, hook or
	// setting differs (a comment, a re-keyed SOPS file). The agent
	// renders and applies it again, and runs its Helm hooks again.
	InputsOnly bool `json:"inputsOnly,omitempty"`
	// Reencrypted, for an InputsOnly unit, are the SOPS files it reads
	// whose bytes changed while their values' ciphertext did not (`sops
	// updatekeys`, or re-encrypted), repo-relative.
	Reencrypted []string `json:"reencrypted,omitempty"`
}

// ObjectPlan is one object's change.
type ObjectPlan struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Change     Change `json:"change"`
	// Diff is a unified diff (hunks only) of the object's YAML with
	// generated fields dropped and Secret values masked; every line for an
	// added or removed object.
	Diff string `json:"diff"`
	// After is the object as it will be applied (normalized, Secret
	// values masked); absent for a removed object.
	After *unstructured.Unstructured `json:"after,omitempty"`
	// Hook, for a Helm hook, says when it runs: its events, weight and
	// delete policies.
	Hook string `json:"hook,omitempty"`
}

// MarshalJSON encodes After as a plain mapping, so the encoder's settings
// (no HTML escaping) apply to it too.
func (o ObjectPlan) MarshalJSON() ([]byte, error) {
	type plain ObjectPlan
	var after map[string]any
	if o.After != nil {
		after = o.After.Object
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		plain
		After map[string]any `json:"after,omitempty"`
	}{plain(o), after})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// ID is "Kind namespace/name" (or "Kind name" for cluster-scoped objects).
func (o *ObjectPlan) ID() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}
