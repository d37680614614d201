// Package agentproc runs Flotilla's agent for end-to-end tests and
// benchmarks, against a test cluster (test/testenv) and a Git server
// (test/gitserver), in one of two ways:
//
//   - Start runs the real flotilla-agent binary (Binary: built once per test
//     binary) with the given flags, its output in a log file; Process reads
//     the JSON log (records, listen addresses, cycles), /metrics, the status
//     file, and stops it with SIGTERM (Stop) or SIGKILL (Kill).
//
//   - NewInProcess wires the agent's reconcile loop in this process as the
//     binary does (applier, Git source, JSON logs at debug level), for tests
//     that drive cycles themselves or read the loop's status directly.
//
// Both stop when the test ends and show the tail of the agent's log when it
// failed.
package agentproc
