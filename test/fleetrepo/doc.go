// Package fleetrepo is the tests' fleet repository: a working directory
// on disk, pushed to a repository of a test Git server (test/gitserver).
// A test writes, edits and removes files in the directory, renders it
// with the hub if it wants, and Push sends what changed since the last
// push as one commit by the maintainer (PushSigned: signed, as a
// maintainer with a signing key would).
package fleetrepo
