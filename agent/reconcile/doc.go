// Package reconcile owns the agent's loop: each cycle makes the cluster
// match the cluster's slice of the fleet repo and reports what it did as a
// status.ClusterStatus.
//
// # One cycle
//
// A cycle is a declared list of phases (Loop.phases in cycle.go), each a
// function of the cycle's state (cycleRun), run in order by one loop:
//
//  1. fetch: Source.Sync (ls-remote, and a shallow fetch only when the head
//     moved). When Git is unreachable the cycle goes on with the cached
//     checkout (Source.LastGood), so drift is still corrected offline.
//  2. verify: the revision must be the configured branch's, then the
//     Verifier (commit signatures, agent/verify) decides. A refused commit
//     changes nothing: the cycle reconciles the last accepted revision.
//     That revision is recorded in the cluster (Config.State, the agent's
//     state ConfigMap), so a restarted agent or a new leader whose head is
//     refused or unreadable restores it — from the cache, or fetched
//     again (Checkouter) — and keeps correcting drift from it.
//  3. slice: slice.Read of rendered/<bucket>/<cluster>/slice.yaml. An
//     unreadable slice also falls back to the last accepted revision; with
//     none, every unit is left as it is.
//  4. units, in dependency order, up to Config.Workers at a time: a unit
//     whose dependsOn are not all Ready waits (DependencyNotReady) and is
//     retried next cycle; a failure never stops an independent unit. Per
//     unit: Applier.Check compares the inventory with the live objects'
//     metadata (one List per kind per cycle, Applier.Observe); a unit with
//     the same content hash and no drift is neither rendered nor applied.
//     Otherwise render.Unit (Helm capabilities from live discovery, cached
//     per cycle) and Applier.Apply (server-side apply, prune, health; a
//     helm unit's hooks run in Helm's phases around it, once per unit
//     hash, and a failed one is HookFailed until the unit changes).
//     A unit that fails to render keeps its last applied state — nothing is
//     applied or pruned — and its error goes to status; if its objects
//     drifted meanwhile, they are restored from the last revision it
//     rendered at, while that checkout is still on disk.
//     Objects are owned by one unit (owners.go, agent/apply's ownership
//     rule): an object labelled for another unit is taken over only when
//     that unit no longer claims it at this revision (it left the slice,
//     or its inventory at the slice's hash, else its render, lacks the
//     object); otherwise the unit reports Conflict and the rest of it is
//     applied. A stale object another unit of the slice renders is handed
//     over (left in place, dropped from the inventory) rather than pruned,
//     so an object moved between units in one commit is never deleted,
//     whichever unit is applied first.
//  5. units that left the slice are deleted through their inventories
//     (Applier.DeleteUnit honours the prune flag they were applied with, and
//     hands over what another unit renders), after the others were applied,
//     so an object moving between units is never deleted and re-created. When they are all the units with an inventory,
//     or more than Config.PruneHoldFraction of them, and the slice is not
//     marked decommission, none is deleted: the cluster's PruneHeld
//     condition names them (prunehold.go, slice.HoldsPrune).
//  6. status: a status.ClusterStatus goes to the StatusSink, metrics are
//     updated.
//
// While a cycle runs, every Config.Heartbeat / 2 the last cycle's result
// (or Config.Previous, the status file an earlier process of the pod left)
// goes to the StatusSink again with the cycle's progress (status.Progress:
// phase, units being reconciled and since when), so a long health wait
// never leaves the cluster without heartbeats (progress.go). The
// heartbeats stop, and the last one is published, before the cycle's
// result is: the result is always the last document of a cycle.
//
// # Timing
//
// Run starts a cycle every Config.Interval (±Config.Jitter). Between
// cycles it polls Git every Config.PollInterval (default: the interval); a
// moved head starts a cycle at once, in which only changed (or drifted)
// units are rendered and applied. Trigger starts one at once too (the
// agent calls it on a reconcile request, agent/cmd/trigger.go). While Git fails, those polls back off
// exponentially with jitter up to the interval (cycles keep their pace).
//
// The polls go on while a cycle's units run (watch.go): a newer revision
// that passes verification and changes any unit of the slice ends every
// health wait of the cycle at once (applies are never stopped half-way),
// and Run starts the next cycle on it without waiting. A unit the newer
// revision changes is recorded Superseded; one it leaves as it is waits
// on in the next cycle until the deadline it had. The revision's checkout
// is held (Holder) meanwhile, so the polls cannot remove it from under
// the units still rendering from it. When its context ends, Run lets the
// current cycle finish for up to Config.ShutdownGrace, then cancels it
// (agent/apply records new objects before creating them, so an interrupted
// apply orphans nothing). After each cycle Run returns freed memory to the
// OS (one forced GC per cycle), so the agent's resident size between
// cycles is what it keeps, not the cycle's peak.
//
// # Readiness of unchanged units
//
// A unit that is up to date and was Ready in an earlier cycle of this
// process stays Ready without reads once it has been Ready at its content
// for Config.ReadyRecheck (until then, with wait, CheckReady reads it once
// a cycle, so a revision that breaks after some minutes is reported during
// a rollout's bake); one whose readiness is unknown (after a restart) or
// was not Ready is waited for with Applier.WaitReady until its timeout
// when it sets wait. A wait ends at once when an object is Failed (unless
// the unit sets WaitForTimeout), with the object's own message; kinds
// kstatus cannot read are judged by the unit's health checks (pkg/health). Status carries when the unit became Ready at
// its content (readySince), which rollouts bake from.
//
// # Suspended units
//
// A unit the slice suspends (slice.Unit.Suspend) is neither rendered,
// applied, pruned nor drift-corrected; its inventory and health are only
// read, and status reports it Suspended (suspend.go). It does not hold
// back the cluster's applied revision.
//
// Consumers' interfaces (Source, Applier, Discovery, Verifier, StatusSink)
// live here; *gitrepo.Source and *apply.Applier implement theirs.
package reconcile
