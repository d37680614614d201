package kuratorimport

// Minimal mirrors of Kurator's specs (see doc.go for the source commit):
// only the fields the converter maps. Everything else is reported by
// unmapped, never decoded.

type fleetSpec struct {
	Clusters []clusterRef `yaml:"clusters"`
}

// clusterRef is the corev1.ObjectReference Kurator's Fleet lists members with.
type clusterRef struct {
	Name string `yaml:"name"`
	Kind string `yaml:"kind"`
}

// provisionedClusterSpec is the part of cluster.kurator.dev Cluster kept:
// the Kubernetes version becomes Flotilla's kubernetesVersion hint.
type provisionedClusterSpec struct {
	Version string `yaml:"version"`
}

type appSpec struct {
	Source       appSource    `yaml:"source"`
	SyncPolicies []syncPolicy `yaml:"syncPolicies"`
	Destination  *destination `yaml:"destination"`
}

type appSource struct {
	GitRepository  *gitRepository  `yaml:"gitRepository"`
	HelmRepository *helmRepository `yaml:"helmRepository"`
	OCIRepository  map[string]any  `yaml:"ociRepository"`
}

// gitRepository is Flux's source.toolkit.fluxcd.io/v1beta2 GitRepositorySpec.
type gitRepository struct {
	URL string  `yaml:"url"`
	Ref *gitRef `yaml:"ref"`
}

type gitRef struct {
	Branch string `yaml:"branch"`
	Tag    string `yaml:"tag"`
	SemVer string `yaml:"semver"`
	Name   string `yaml:"name"`
	Commit string `yaml:"commit"`
}

// helmRepository is Flux's HelmRepositorySpec.
type helmRepository struct {
	URL  string `yaml:"url"`
	Type string `yaml:"type"`
}

type destination struct {
	Fleet           string           `yaml:"fleet"`
	ClusterSelector *clusterSelector `yaml:"clusterSelector"`
}

type clusterSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type syncPolicy struct {
	Name          string         `yaml:"name"`
	Kustomization *kustomization `yaml:"kustomization"`
	Helm          *helmRelease   `yaml:"helm"`
	Destination   *destination   `yaml:"destination"`
}

// kustomization is Kurator's apps/v1alpha1 Kustomization.
type kustomization struct {
	Path            string  `yaml:"path"`
	Prune           bool    `yaml:"prune"`
	TargetNamespace string  `yaml:"targetNamespace"`
	Timeout         string  `yaml:"timeout"`
	Patches         []patch `yaml:"patches"`
	Images          []image `yaml:"images"`
}

// patch and image are fluxcd/pkg/apis/kustomize Patch and Image.
type patch struct {
	Patch  string       `yaml:"patch" json:"patch"`
	Target *patchTarget `yaml:"target" json:"target,omitempty"`
}

type patchTarget struct {
	Group              string `yaml:"group" json:"group,omitempty"`
	Version            string `yaml:"version" json:"version,omitempty"`
	Kind               string `yaml:"kind" json:"kind,omitempty"`
	Name               string `yaml:"name" json:"name,omitempty"`
	Namespace          string `yaml:"namespace" json:"namespace,omitempty"`
	LabelSelector      string `yaml:"labelSelector" json:"labelSelector,omitempty"`
	AnnotationSelector string `yaml:"annotationSelector" json:"annotationSelector,omitempty"`
}

type image struct {
	Name    string `yaml:"name" json:"name"`
	NewName string `yaml:"newName" json:"newName,omitempty"`
	NewTag  string `yaml:"newTag" json:"newTag,omitempty"`
	Digest  string `yaml:"digest" json:"digest,omitempty"`
}

// helmRelease is Kurator's apps/v1alpha1 HelmRelease.
type helmRelease struct {
	Chart struct {
		Spec struct {
			Chart   string `yaml:"chart"`
			Version string `yaml:"version"`
		} `yaml:"spec"`
	} `yaml:"chart"`
	ReleaseName     string         `yaml:"releaseName"`
	TargetNamespace string         `yaml:"targetNamespace"`
	Timeout         string         `yaml:"timeout"`
	Values          map[string]any `yaml:"values"`
}

// mapped lists, per kind, the field paths the converter consumes ([] for
// any list index). A path ending in "/" is consumed with everything under it.
var mapped = map[string][]string{
	kindFleet: {"spec", "spec.clusters", "spec.clusters[]", "spec.clusters[].name", "spec.clusters[].kind",
		"spec.clusters[].apiVersion", "spec.clusters[].namespace"},
	kindAttachedCluster: {},
	kindCluster:         {"spec", "spec.version"},
	kindApplication: {"spec", "spec.source", "spec.source.gitRepository", "spec.source.gitRepository.url",
		"spec.source.gitRepository.ref", "spec.source.gitRepository.ref/",
		"spec.source.helmRepository", "spec.source.helmRepository.url", "spec.source.helmRepository.type",
		"spec.destination/",
		"spec.syncPolicies", "spec.syncPolicies[]", "spec.syncPolicies[].name", "spec.syncPolicies[].destination/",
		"spec.syncPolicies[].kustomization", "spec.syncPolicies[].kustomization.path",
		"spec.syncPolicies[].kustomization.prune", "spec.syncPolicies[].kustomization.targetNamespace",
		"spec.syncPolicies[].kustomization.timeout", "spec.syncPolicies[].kustomization.patches/",
		"spec.syncPolicies[].kustomization.images/",
		"spec.syncPolicies[].helm", "spec.syncPolicies[].helm.chart", "spec.syncPolicies[].helm.chart.spec",
		"spec.syncPolicies[].helm.chart.spec.chart", "spec.syncPolicies[].helm.chart.spec.version",
		"spec.syncPolicies[].helm.releaseName", "spec.syncPolicies[].helm.targetNamespace",
		"spec.syncPolicies[].helm.timeout", "spec.syncPolicies[].helm.values/"},
}

// reasons explain, by the last element of a dropped field's path, why it
// has no equivalent; fields not listed get a generic reason.
var reasons = map[string]string{
	"interval":           "agents reconcile on their own poll interval",
	"retryInterval":      "agents retry on their own poll interval",
	"suspend":            "not carried over: to keep it suspended, set suspend: true on the Flotilla application or its sync policy",
	"timeout":            "a source fetch timeout has no meaning: sources are vendored in the fleet repo",
	"install":            "Helm install/upgrade/rollback/uninstall actions and remediation: charts are rendered with helm template and applied server-side",
	"upgrade":            "Helm install/upgrade/rollback/uninstall actions and remediation: charts are rendered with helm template and applied server-side",
	"rollback":           "Helm install/upgrade/rollback/uninstall actions and remediation: charts are rendered with helm template and applied server-side",
	"uninstall":          "Helm install/upgrade/rollback/uninstall actions and remediation: charts are rendered with helm template and applied server-side",
	"maxHistory":         "there are no Helm release records",
	"valuesFrom":         "values are read from the fleet repo only; inline them under values",
	"valuesFiles":        "chart values files: copy their content into values",
	"dependsOn":          "Flux object dependencies: set the application's dependsOn by hand",
	"rollout":            "Flagger progressive delivery: see TrafficRoute in docs/fleet-repo.md",
	"plugin":             "fleet plugins (metrics, policy, backup, storage, Flagger, Submariner): deploy the add-on as an Application",
	"kubeconfig":         "Flotilla is pull mode and holds no kubeconfig: install the agent with flotilla bootstrap",
	"secretRef":          "credentials: sources are fetched when vendoring, not by the agent: give them to flotilla render --source-credentials-dir",
	"ociRepository":      "OCI sources are not supported yet",
	"serviceAccountName": "the agent applies with its own ServiceAccount",
	"force":              "the agent never recreates objects on immutable-field conflicts",
	"commonMetadata":     "add labels/annotations with a Kustomize patch in the source",
	"components":         "Kustomize components: reference them from the source's kustomization.yaml",
	"persistentClient":   "Helm client settings do not apply",
	"metadata":           "HelmChart object metadata does not apply",
	"reconcileStrategy":  "charts are pinned when vendored",
}

// provisioning is the reason for cluster.kurator.dev Cluster fields.
const provisioning = "cluster provisioning (Cluster API: infrastructure, network, master, workers) is out of Flotilla's scope; provision the cluster elsewhere and bootstrap its agent"
