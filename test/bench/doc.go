// Package bench holds the benchmarks behind `make bench` (results in
// test/results/bench.txt) and what they need: for the hub's render, a
// generator of large synthetic fleet repos (1,000 and 10,000 clusters × 20
// applications); the render benchmarks run the built bin/flotilla as a child
// process, so they measure what users run — wall time and peak RSS of a full
// render, a no-op re-render, and what a one-application change rewrites; and, with a 3-wave
// rollout in progress for every application, render, `rollout advance` and
// the Git cost of a rollout snapshot (BenchmarkRollout); and how long a
// good change takes from its push to the last of 3 waves, with the
// template's rollout job following the agents' status pushes
// (BenchmarkRolloutPushToLastWave, results in
// test/results/bench-rollout-push.txt).
package bench
