// Package gitsource vendors applications' external Git sources
// (spec.source.git) into the fleet repo, so agents keep reading only their
// fleet repo: the tree at the source's path, at one commit, is written to
// sources/<application>/, and sources/<application>.lock.yaml pins it —
// the URL (without credentials), the ref and path as the application
// wrote them, the resolved commit and the Git hash of the vendored tree.
//
// Vendor runs at every render, before the compiler reads any source:
//
//   - A lock that matches the application's url, ref and path is used as
//     is: a branch is not re-resolved, and when the vendored copy still
//     hashes to the lock's tree nothing touches the network. A copy that
//     was edited or deleted is restored from the pinned commit.
//   - Without a matching lock (a new source, or a changed url, ref or path),
//     or with Options.Update (flotilla render --update-sources), the ref is
//     resolved with ls-remote and the copy replaced when the commit moved.
//   - Options.Check writes nothing and uses no network: a missing or
//     mismatched lock, or a copy whose tree hash is not the lock's, is a
//     *StaleError naming the application and file.
//   - Directories and locks under sources/ that no application uses are
//     removed (reported as stale by Check): sources/ is generated.
//
// Fetches go through pkg/gitrepo (FetchTree: depth 1, a temporary object
// store, every network call under a timeout, credentials never written
// or printed). The vendored tree has the agent's limits: a file larger than
// the agent's render reads (render.DefaultMaxFileSize), more than
// render.DefaultMaxTotalSize bytes in all, a pack larger than
// gitrepo.DefaultMaxFetchSize, more than MaxFiles files, an entry name that
// could leave its directory, a symlink that leaves the vendored tree and a
// submodule are refused before anything is written.
//
// It is hub-only (hub/fleetrender calls it); the agent never links it.
package gitsource
