// Package render turns one slice unit into Kubernetes objects. It is the
// only importer of krusty (sigs.k8s.io/kustomize/api) and the Helm SDK, and
// both the hub (plan) and the agent call Unit, so a plan shows exactly what
// an agent applies.
//
// # Units
//
// kustomize, manifests and volcano units: krusty builds the unit directory,
// whose (generated) kustomization.yaml may reference anything in the repo.
//
// A directory the unit's kustomization lists as a resource (an
// application's source) that has no kustomization file gets the one Flux's
// kustomize-controller would generate there, in memory: every file below
// it whose name ends in .yaml or .yml, in lexical order, each of which must
// parse as Kubernetes YAML; a subdirectory with a kustomization file of its
// own listed as one resource and not descended into; other files and
// symlinked directories skipped; an empty kustomization when nothing is
// listed. So a source Flux deploys from a plain directory renders the
// same. Kustomizations in the repo keep kustomize's rule: a directory they
// list must have a kustomization file. A test keeps Flux's generator
// (github.com/fluxcd/pkg/kustomize) as the oracle.
//
// helm units: the chart at Helm.Chart (a directory or a .tgz in the repo) is
// templated with Helm.Values as Helm's install action does in a client-only
// dry run (`helm template --include-crds`), with release name
// Helm.ReleaseName (default: the unit name), release namespace Namespace
// (default "default") and Options.Capabilities: the cluster's Kubernetes
// version (DefaultKubeVersion when unknown) and API versions added to
// Helm's, and Helm's version as its release binary reports it. CRDs from
// crds/ are included; NOTES.txt and test hooks are dropped: Flotilla never
// runs `helm test` (hooks that test a release on request have no place in a
// reconcile loop), so they are not rendered, as with `helm template
// --skip-tests`. Other hooks (objects annotated helm.sh/hook) go through
// the unit's kustomization with the rest and are then set apart in
// Result.Hooks with their events, weight and delete policies
// (before-hook-creation when none), ordered as Helm's install and upgrade
// run them (by weight, then name, then kind): the agent runs them around
// the unit's apply, not as its objects. The output becomes
// slice.HelmOutputFile in the unit directory (in memory only) and krusty
// builds the unit's kustomization.yaml, which lists it, so images, replicas
// and patches apply to charts exactly as to kustomize sources; without a
// kustomization.yaml, one listing the output is generated.
//
// # Namespaces
//
// Every object ends with the namespace the cluster will hold it in, so that
// what plan shows, what the agent applies, tracks, prunes and checks for
// drift, and what the cluster holds are the same object:
//
//   - A helm unit's objects keep the namespaces the chart gave them (a
//     RoleBinding in kube-system stays there); the release namespace fills
//     only namespaced objects that have none, as `helm install --namespace`
//     does. RoleBinding subjects are left as the chart wrote them.
//   - kustomize, manifests and volcano units keep kustomize's `namespace:`
//     behaviour, with two exceptions: a cluster-scoped kind never gets a
//     namespace (kustomize treats kinds it does not know, such as custom
//     kinds and built-in kinds newer than its schema, as namespaced), and a
//     subject of a RoleBinding or ClusterRoleBinding that is not a
//     ServiceAccount has no namespace (kustomize sets one on every subject
//     named "default"; RBAC gives a User or Group none).
//   - A cluster-scoped object never has a namespace (the API server drops
//     one sent with it).
//
// A kind's scope comes from Capabilities.Namespaced (the agent fills it
// from its cluster's discovery), else from the CustomResourceDefinitions
// the unit renders, else from the kinds built into Kubernetes and the
// Volcano and Istio kinds Flotilla generates itself. A kind
// found in none of them is treated as namespaced and listed in
// Result.UnknownScope, which plan reports (the hub has no discovery: it
// passes the scopes of the CRDs the whole fleet ships, found by compile).
//
// # SOPS-encrypted files
//
// Every file read from the repository that is a SOPS document (its sops
// metadata, in the format its extension names: YAML, JSON, dotenv, else
// sops' binary form) is replaced before krusty or Helm see it: by its
// plaintext when Options.Decryptor is set (the agent, with its cluster's
// age key; see pkg/render/sopsdecrypt), else by its redacted form, each
// encrypted value a sopsdecrypt.RedactedPrefix marker of its ciphertext
// (the hub, which has no key). So encrypted manifests, secretGenerator
// .env and binary inputs and Helm values work alike, and kustomize's
// transformers run on plaintext. A file that does not decrypt fails the
// unit with ErrDecrypt naming it; Result.Encrypted lists the SOPS files
// read. Plaintext stays in memory for the render only. Without a
// Decryptor, a Secret or ConfigMap a kustomize generator makes from
// encrypted files is named "<name>-" + ClusterHash, and so is every
// reference to it: kustomize's name suffix is a hash of the plaintext,
// which only the cluster has.
//
// # One unit's inputs, one render
//
// A unit renders the same objects alone or beside any other units, in any
// order and at any concurrency. kustomize keeps the OpenAPI schema its
// patches merge by in process-wide state, which a kustomization's
// `openapi:` field changes for the rest of the process: a unit whose
// kustomizations set one is built while no other kustomize build runs,
// from a fresh state, as `kustomize build` of its tree alone; the others
// share the built-in schema (schema.go). Helm's SDK keeps no state between
// renders that changes output (templates run in worker processes; the
// default capabilities are copied, never appended to).
// TestUnitRendersAsAlone holds this.
//
// # Output
//
// Result.Objects are sorted in apply order (kinds others depend on first,
// webhooks last), then by group, kind, namespace and name: the order is a
// function of the objects alone. Every object has apiVersion, kind and
// metadata.name, and no two share group, kind, namespace and name.
//
// # Confinement and bounds
//
//   - Every file is read through a filesystem rooted at the repository:
//     paths are cleaned and must stay inside (ErrPathEscape); symlinks are
//     resolved component by component and must stay inside too
//     (ErrSymlinkEscape); the resolved path is opened through an os.Root.
//   - Each file read is limited to Limits.MaxFileSize (ErrTooLarge naming the
//     file) and scanned for YAML alias bombs before anything parses it
//     (ErrYAMLBomb); so is the Helm output.
//   - Kustomizations are walked before krusty runs: URLs in resources,
//     components or any file field (ErrRemoteBase), non-builtin generators,
//     transformers and validators and the helmCharts generator
//     (ErrPluginsDisabled) are refused, so krusty never clones, downloads or
//     executes anything. krusty runs with builtin plugins only.
//   - Output is bounded by Limits.MaxTotalSize and Limits.MaxObjects.
//   - Limits.Timeout and the caller's deadline bound the render (ErrTimeout).
//     krusty stops at its next file read once the deadline passes. Helm
//     templates are Go templates and cannot be interrupted, so they run in
//     worker processes that re-execute the current binary (see
//     ServeWorkerIfRequested); a worker is killed at the deadline, or when
//     its resident memory exceeds Limits.MaxHelmMemory (ErrTooLarge), and its
//     address space is capped as a backstop. A binary that does not call
//     ServeWorkerIfRequested, or Options.HelmInProcess, templates in a
//     goroutine: Unit still returns at the deadline, but a template that never
//     ends keeps a CPU busy until the process exits.
//
// Remaining limits: charts/*.tgz subcharts are unpacked by Helm inside the
// worker (Helm's own archive limits apply, and the worker's time and memory
// bounds); krusty's CPU use between two file reads is not interruptible,
// but is bounded by the input sizes; memory is watched on Linux only.
//
// Errors are *Error values classified by the Err* sentinels; messages name
// the repo-relative file at fault when it is known and carry no object
// contents (first line only, Go map dumps, flow objects and long base64 runs
// elided).
//
// # Vendoring
//
// Chart-repository charts are vendored by the hub-side package
// pkg/render/chartvendor, which the agent does not link.
package render
