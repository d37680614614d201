// Package cmd owns the flotilla-agent command line: flags, FLOTILLA_*
// environment variables and the --config GitRepository file (precedence in
// that order), and the process wiring around the reconcile loop: Kubernetes
// client (kubeconfig or in-cluster, QPS/burst), Git credentials from a
// mounted Secret, leader election on a Lease, /metrics, /healthz and
// /readyz, structured logs and graceful shutdown on SIGTERM (the current
// cycle finishes or is cancelled, then the lease is released).
package cmd
