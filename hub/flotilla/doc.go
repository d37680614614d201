// Command flotilla is the hub CLI: it validates and renders the fleet repo,
// plans pull requests and reads the fleet's status from Git. This package
// owns only the process entry point (the Helm render worker hook and the
// exit code); the commands live in hub/cmd.
package main
