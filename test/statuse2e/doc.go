// Package statuse2e holds the end-to-end test of status through Git: three
// real clusters (test/testenv, minimal mode), three agent loops in process
// (agent/reconcile) committing status with pkg/status's writer to a real
// Git server with per-agent push rules (test/gitserver), and the hub's
// `flotilla status` reading the fleet back from Git alone.
package statuse2e
