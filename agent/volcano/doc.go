// Package volcano owns Flotilla's Volcano batch jobs and queues on the
// agent side: the capacity a cluster reports (the input of GlobalJob
// BestFit placement, whose arithmetic is in pkg/placement), the gang
// preflight before a job is submitted, the submission semantics of job
// units, and job status. The hub's views of what agents report (the
// fleet's jobs, reported capacities) are in hub/fleetview, which the
// agent does not link.
//
// # Units
//
// The hub renders a cluster's Volcano objects as units of kind volcano
// (hub/fleetrender): flotilla-queues, the fleet's queues
// (scheduling.volcano.sh/v1beta1 Queue), applied like any unit; and one
// unit job-<name> per GlobalJob piece placed on the cluster, holding one
// batch.volcano.sh/v1alpha1 Job and depending on flotilla-queues. Before
// either, the agent checks that the cluster serves Volcano's APIs
// (discovery of batch.volcano.sh/v1alpha1 jobs and
// scheduling.volcano.sh/v1beta1 queues); if not, the unit fails with
// ErrNotInstalled ("Volcano is not installed on this cluster") and the
// cluster's other units are unaffected.
//
// # Submission
//
// Volcano job specs are immutable and a job is a run, so a job unit is
// created, never re-applied (Manager.SubmitJob):
//
//   - The rendered Job's spec hash (sha256 over the rendered object minus
//     Flotilla's own annotations) is recorded on the created job as
//     AnnotationSpecHash.
//   - No live job: the gang preflight runs; Unschedulable is not submitted
//     (no PodGroup, no pods) and is checked again every cycle; Fits and
//     Waiting are created (apply.UnitRequest.CreateOnly) with the verdict
//     in AnnotationPreflight. A job the unit's inventory says was created
//     at this same unit hash and that has since disappeared (deleted by
//     someone) is not created again: that would re-run it.
//   - Live job, same spec hash: left alone, whatever its phase — a
//     Completed or Failed job is never re-run by later commits.
//   - Live job, different spec hash, still active (Pending, Running, …):
//     left as it is and reported "spec changed; running job left as is",
//     unless the rendered job carries AnnotationRecreate ("true", from
//     GlobalJob spec.recreate): then it is deleted (foreground, so its pods
//     are gone first) and the new spec submitted after the preflight.
//   - Live job, different spec hash, finished (Completed, Failed, Aborted,
//     Terminated): deleted and the new spec submitted — a changed spec is a
//     new run, which is what users expect after editing a finished job.
//   - A live job of the unit's name that Flotilla did not create for this
//     unit is never touched (ErrNotOwned).
//
// A job unit is Ready once its job is submitted at the current spec (the
// job's own outcome is in status, not in the unit's readiness); it is not
// Ready while Unschedulable, while a changed spec waits for the running
// job, or while an old job is being deleted.
//
// A unit that left the slice (its GlobalJob removed from Git, or placed
// elsewhere) is deleted with its job, except a finished job, which is kept
// for Options.CompletedRetention after it finished (agent flag
// --volcano-completed-retention, default 1h) so its outcome stays visible;
// Manager.RetainRemoved tells the loop which to keep. Apply's pruning never
// deletes the job of a unit still in the slice, so a running job of an
// unchanged spec is never killed.
//
// # Status
//
// Manager.Report lists the cluster's Flotilla-managed Volcano jobs with
// their PodGroups (phase, running/succeeded/failed pods, preflight verdict,
// start and finish times — start is the job's first Running condition,
// finish the transition into its final phase) plus the jobs not submitted
// (phase NotSubmitted, verdict Unschedulable, with the shortfall), and a
// capacity snapshot: Ready and schedulable nodes, their allocatable cpu,
// memory and extended resources (nvidia.com/gpu, …), free = allocatable
// minus the requests of the non-terminal pods bound to them, and each
// queue's capability and allocation (requests of its bound non-terminal
// pods). The hub reads these from the status documents
// (hub/fleetview): CapacitiesFrom turns them into BestFit's input,
// NewJobsView into `flotilla status jobs`.
package volcano
