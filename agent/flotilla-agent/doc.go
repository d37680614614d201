// Command flotilla-agent runs in every member or edge cluster: it pulls the
// cluster's slice of the fleet repo, applies it and reports status. This
// package owns only the process entry point (the Helm render worker hook and
// the exit code); flags and wiring live in agent/cmd, the loop in
// agent/reconcile.
package main
