// Package plan owns `flotilla plan`: what merging one revision of the fleet
// repo into another changes on every cluster, and printing that as text,
// Markdown for a pull-request comment, or JSON.
//
// # How a plan is made
//
// Compute exports both revisions (the head may be the working tree, copied)
// into a temporary directory and compiles each from its inputs through
// compile.Pipeline, as `flotilla render` does in CI (GlobalJobs placed
// already are read from each side's committed rendered/, reported capacity
// from the same status refs render reads). The head's committed rendered/
// is compared with its fresh compile: agents apply what is committed, so a
// stale rendered/ is reported as a warning (CI's `render --check` fails on
// it). Units are then paired by name per cluster; a unit whose content hash
// is the same on both sides renders the same objects and is skipped
// without rendering, so a one-application change over a thousand clusters
// renders only the units it touches. Every other unit is rendered on both
// sides by render.Unit — the function the agent applies with — with the
// cluster's Helm capabilities: from its latest status document (the live
// API server; read from refs/heads/flotilla/status/<cluster> or
// refs/remotes/origin/flotilla/status/<cluster>, and believed only when its
// commit touched status.yaml alone, names the cluster and, when the
// Cluster lists statusKeys, is signed by one), else from
// clusters/<name>.yaml, else Helm's defaults. Both sides of a cluster use
// the same capabilities.
//
// Objects are compared by group, kind, namespace and name, as YAML with
// the fields the API server writes dropped (status, metadata.managedFields,
// resourceVersion, uid, generation, creationTimestamp, selfLink and the
// kubectl last-applied annotation); labels and annotations stay, so a chart
// version bump in helm.sh/chart is a change. Secret (v1) data and
// stringData values are replaced by "<masked: sha256:…>", an HMAC under a
// key chosen per run (Options.MaskKey fixes it): a changed value shows as
// changed, equal values as equal, and no output — JSON included — carries
// the value or a hash that could be brute-forced offline. A value that is
// SOPS-encrypted in Git renders without its key as
// "<sops-encrypted:sha256:…>", a digest of its ciphertext (see
// render.Options.Decryptor): it shows as encrypted, and as changed when
// its ciphertext changed, never with its value. A Secret or ConfigMap
// kustomize generates from encrypted files, and every reference to it, is
// named "<name>-<hash decided on the cluster>" (render.ClusterHash).
//
// A unit whose content hash changed while none of its objects, hooks or
// settings did (a comment, a SOPS file re-keyed by `sops updatekeys`:
// same encrypted values, new recipients) is still listed as changed, with
// a line saying so, naming the SOPS files whose bytes changed: the agent
// renders and applies it again, and runs its Helm hooks again.
//
// Notes say in words what moved between clusters: replica divisions
// ("nginx: member1 3→2 replicas, member2 1→2") and Volcano job placements
// ("job tf-training: placed on member2 (was member1)"). Ownership says what
// changes units within a cluster: an object removed from one unit and added
// to another is a move the agent hands over without a delete, and an
// application's copy of a fleet namespace newly left out of its unit is the
// compiler's note. Two units claiming one object fail the head compile, so
// the plan is an error naming both.
//
// A unit that fails to render at head is in the plan with its error and
// sets Plan.Failed (the agent would fail on it too); one that fails at base
// is a warning and its head objects count as added. A cluster that leaves
// the repo is shown as removed, with a warning that its agent deletes
// nothing (it finds no slice). A cluster losing all its units, or more
// than half of them, gets a warning that its agent holds that prune
// (slice.HoldsPrune at the default fraction) until `flotilla cluster
// decommission`; a decommissioned one, that its agent prunes everything.
//
// # JSON (-o json)
//
// The document is Plan, encoded with these fields (stable within
// apiVersion flotilla.dev/v1alpha1; fields may be added, never renamed):
//
//	apiVersion, kind      "flotilla.dev/v1alpha1", "Plan"
//	base, head            {ref, commit}; head.ref "working tree" has no commit
//	summary               {clusters, unitsAdded, unitsRemoved, unitsChanged,
//	                       objectsAdded, objectsRemoved, objectsChanged}
//	notes                 ["nginx: member1 3→2 replicas, member2 1→2", …]
//	warnings              [string, …]
//	failed                true when a unit failed to render at head
//	stats                 {unitsCompared, unitsRendered}: units with the same
//	                      hash on both sides are compared, not rendered
//	clusters[]            only clusters that change, by name:
//	  name, change        change: "added" | "removed" | "changed"
//	  capabilities        {kubeVersion, apiVersions (a count), source: "status" | "cluster" | "default"}
//	  counts              as summary, for this cluster (clusters = 1)
//	  units[]             head's order, removed units last:
//	    name, kind, change, baseHash, headHash
//	    settings          ["prune: true → false", …] (how the unit is applied)
//	    error, baseError  render errors (no object contents)
//	    inputsOnly        true when the hash changed but no object, hook or
//	                      setting differs (the agent still re-applies it)
//	    reencrypted       for such a unit, the SOPS files it reads whose
//	                      bytes changed (re-keyed, re-encrypted)
//	    objects[]         head's order, removed objects last:
//	      apiVersion, kind, namespace, name, change
//	      diff            unified diff hunks of the object's YAML
//	      after           the object as it will be applied (absent when removed)
//	    hooks[]           a helm unit's Helm hooks that change, as objects[]
//	                      plus hook: when the agent runs it ("pre-install,
//	                      pre-upgrade; weight 0; delete before-hook-creation");
//	                      absent when none change; not in counts
//
// Lists are never null. Text and Markdown carry the same facts.
//
// # Exit codes
//
// The CLI exits as diff(1): 0 when the plan is empty, 1 when something
// changes, 2 on an error (including a unit failing to render at head).
package plan
