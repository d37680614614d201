// Package apply owns applying one unit's objects to a cluster: server-side
// apply through github.com/fluxcd/pkg/ssa, the per-unit inventory persisted
// in the cluster, pruning, drift detection and kstatus health.
//
// # Use
//
//	clients, err := apply.NewClients(restConfig, nil) // shared with everything else that talks to the cluster
//	a, err := apply.NewWithClients(clients, apply.Options{InventoryNamespace: "flotilla-system", Cluster: "edge-1"})
//	res, err := a.Apply(ctx, apply.UnitRequest{Name: "web", Hash: unit.Hash, Objects: objs, Prune: true, Wait: true, Timeout: time.Minute})
//	ready, notReady, err := a.CheckReady(ctx, "web") // for dependsOn
//	units, err := a.Units(ctx)                       // units with an inventory
//	res, err = a.Delete(ctx, "old-unit")              // a unit that left the slice
//
// # Apply
//
// Objects are server-side applied with field manager "flotilla" (forcing
// ownership) and labelled app.kubernetes.io/managed-by=flotilla and
// flotilla.dev/unit=<unit>; native kinds are normalised first with ssa's
// normalize package, as Flux does. They are applied in stages like
// ssa.ResourceManager.ApplyAllStaged: CRDs, Namespaces and ClusterRoles
// first, then cluster-wide "class" kinds (each stage's written objects
// waited for until kstatus Current), then everything else in
// ssa.ReconcileOrder; consecutive objects of one kind go in parallel.
//
// A failed apply leaves the cluster as it was, as far as the API server
// can tell in advance. For a unit that already has objects, every object
// about to be written is validated with a server-side dry-run and a stage
// is written only when all of its dry-runs passed. A unit with no
// inventory whose objects do not exist yet (one metadata read each) is
// created without dry-runs, and a failure deletes what the call created;
// that saves a dry-run per object on a cold start (about a third of its
// time). An object that already exists (say, adopted from another unit and
// disabled there) sends the whole unit down the dry-run path.
//
// # Inventory
//
// Each unit has a ConfigMap flotilla-inventory-<unit> in
// Options.InventoryNamespace holding the unit hash, the revision that last
// changed the unit, the prune flag and, per object, its id (group, version,
// kind, namespace, name), a hash of the applied content and a fingerprint
// of the live object's "flotilla" managed-fields entry. The encoding is
// line based and grouped by kind and namespace (about 60 bytes per object),
// gzip-compressed into binaryData when large, so tens of thousands of
// objects fit the 1 MiB ConfigMap limit. New object ids are recorded before
// anything is created, so an agent killed mid-apply never orphans objects.
// The revision is rewritten only when the inventory changes for another
// reason, so a new commit that leaves a unit unchanged costs no write.
// Inventories are cached in memory; after Units has listed them all, a unit
// without one needs no read either.
//
// # Unchanged units and drift
//
// An object is not re-applied when its content is unchanged since the last
// apply (same unit hash, or same content hash) and the live object has not
// drifted. Drift is detected without dry-runs: another manager changing or
// removing a field that flotilla applied moves that field out of flotilla's
// managed-fields entry, so the entry's fingerprint changes; a deleted object
// or one that lost its ownership labels also counts as drift. The live
// metadata comes from one metadata-only GET per object, or, for a whole pass
// over many units, from an Observation (one paginated metadata-only List per
// kind, see Observe). An unchanged unit with no drift therefore makes no
// mutating request (WriteCounter measures this); drifted objects are
// re-applied and counted in UnitResult.DriftCorrected. Metadata reads are
// used rather than Flux's check (a GET and a server-side dry-run per
// object) because the dry-runs dominate the API server's and etcd's CPU on
// every cycle of an unchanged cluster; the apply benchmark's figures are in
// test/results/bench-agent.txt.
//
// Imperative edits are undone too. Fields outside metadata owned by the
// field managers of Options.TakeOver (DefaultTakeOver: kubectl's, and
// before-first-apply, as Flux's kustomize-controller cleans up) count as
// drift, even when flotilla's own fields are intact (an env var added by
// kubectl edit). Before a drifted or changed object is applied again those
// fields are moved into flotilla's managed-fields entry (one JSON patch of
// metadata.managedFields, guarded by the resourceVersion), so the apply
// removes what they added and replaces list items whose key they changed
// (a Service port patched from 80 to 8080 would otherwise be merged with
// Git's 80 into an invalid two-port Service). Labels and annotations they
// set stay. An object whose content is what was last applied successfully
// but whose apply is still rejected as Invalid (another manager, not taken
// over, changed a list key) is replaced: an update writes Git's content
// over it, as kubectl replace does, without deleting it; the live drift,
// not Git, made the merge invalid, and admission still judges the
// replacement.
// Secrets are never content-hashed (their data must not leave the cluster
// in any form); they count as unchanged while the unit hash is.
//
// # Health
//
// With Wait, Apply polls kstatus (ssa.WaitForSetWithContext) until every
// object is Current, one Failed, or the unit's Timeout passed, and names
// the objects that are not Ready (ErrHealthTimeout, ErrHealthFailed). An
// unchanged unit is checked too. CheckReady is the same check once, for
// dependsOn.
//
// # Prune
//
// Objects of the previous inventory that are no longer rendered are deleted
// when the unit has Prune set, only if the live object still carries both
// ownership labels for this unit and is not annotated
// flotilla.dev/prune=disabled or flotilla.dev/reconcile=disabled; otherwise
// it is kept and reported in UnitResult.PruneKept. A Namespace is also kept
// while it holds an object Flotilla does not manage (one without the
// managed-by label and without an owner; events and the ServiceAccount and
// CA ConfigMap Kubernetes creates in every namespace do not count), since
// deleting it would delete that object too: UnitResult.KeptNamespaces names
// the object. When its objects cannot be listed, the Namespace is a failed
// delete. A failed delete stays in
// the inventory and is retried by the next Apply, even of an unchanged
// unit. An empty object set is refused with ErrEmpty unless AllowEmpty.
//
// Objects annotated flotilla.dev/reconcile=disabled, in Git or on the live
// object, are neither applied nor pruned. When Git sets that annotation key
// to another value, Git wins. A unit with CreateOnly (Volcano jobs) creates
// missing objects and never updates them.
//
// # Helm hooks
//
// UnitRequest.Hooks (a helm unit's render.Hooks) are not the unit's
// objects: never in its inventory entries, so never pruned or drift. Apply
// runs the pre-install (a unit never completely applied: no inventory
// hash) or pre-upgrade hooks before anything else, and the post-install
// or post-upgrade ones once the unit is Ready, each in weight order, one
// at a time: created by server-side apply (after deleting the previous
// run under before-hook-creation), a Job waited for until Complete or
// Failed and a Pod until Succeeded or Failed, within the unit's timeout,
// then deleted under hook-succeeded or hook-failed. Hooks run once per
// unit hash: the inventory records the hash they ran at and how that
// ended (key "hooks"), so a repeated apply, a restart or a drift
// correction runs none, and a failed hook is returned again (ErrHook,
// naming the hook and its Job's reason) without running until the hash
// changes. A failed pre hook stops the apply before any object is
// written; until the post hooks of a hash have run, Check reports
// HooksPending and UpToDate is false.
//
// # Ownership
//
// An object whose live copy carries another unit's flotilla.dev/unit label
// is taken over only when that unit no longer claims it
// (UnitRequest.Owners, which the agent answers from its slice; without
// one, a unit claims what its inventory lists). Otherwise it is not
// applied, UnitResult.Conflicts names it and its owner, the rest of the
// unit is applied and Apply fails with ErrConflict; the unit's hash is not
// recorded, so the next Apply asks again. Objects without Flotilla's
// labels are adopted. A stale object that Owners says another unit claims
// is released — dropped from the inventory, not deleted
// (UnitResult.HandedOver) — in Apply and in DeleteUnit, so an object moved
// between units is handed over without a delete in either order. When
// Owners cannot tell, the stale object is held: kept in the inventory, not
// deleted, and reported as an ErrPrune error until it can.
//
// # Errors
//
// Errors are classified with errors.Is (ErrInvalid, ErrEmpty, ErrApply, ErrConflict,
// ErrImmutable, ErrPrune, ErrHealthTimeout, ErrHealthFailed, ErrInventory,
// ErrNoInventory, ErrHook) and errors.As (*ObjectError names the object). Apply's
// error is also a *status.Failure that names the condition reason it is reported
// with and whether it stalls, chosen here, where the precedence between joined
// object errors is known (a conflict before a hook, before an invalid unit,
// before a failed apply, prune or health check). Errors about Secrets never
// contain their data: API server messages are masked.
package apply
