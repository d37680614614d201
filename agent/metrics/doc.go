// Package metrics owns the agent's Prometheus metrics: one registry of its
// own (no global state), the flotilla_* series the loop updates after every
// fetch and cycle, Go and process collectors, and the HTTP handler that
// serves them on --metrics-addr.
//
// Series:
//
//	flotilla_reconcile_duration_seconds        histogram, one observation per cycle
//	flotilla_reconcile_total{result}           cycles by result: success, partial, failure
//	flotilla_git_fetch_duration_seconds{result} histogram of Sync calls: success, unreachable, error
//	flotilla_applied_revision_info{revision}   1 for the revision fully applied last
//	flotilla_unit_ready{unit}                  1 when the unit is Ready, else 0
//	flotilla_drift_corrections_total           objects re-applied because they drifted
//	flotilla_managed_objects                   objects the unit inventories own
//	flotilla_leader                            1 while this replica holds the lease
//	flotilla_kube_api_requests_total{type}     API requests: write, dry_run, read
//	flotilla_prune_held                        1 while the cluster's PruneHeld condition is true
//	flotilla_verification_failures_total{reason} refused commits (verify modes other than none)
//	flotilla_agent_restarts_total{cause}       exits before this start, from --cache-dir
//	flotilla_agent_last_exit_cause{cause}      1 for the last exit's cause
//
// manifests/monitoring's alerts and dashboard use these series; a test in
// test/monitoring checks every name they use against this registry.
//
// Every method is safe on a nil *Metrics, so the loop runs without metrics
// in tests.
package metrics
