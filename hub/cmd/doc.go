// Package cmd owns the cobra command tree of the flotilla hub CLI. Commands
// parse flags and print; the work is done in hub/ and pkg/.
package cmd
