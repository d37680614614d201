// Package prereqs resolves the host tools that tests exec (gpg, ssh-keygen,
// diff, …) and fails the test when one is missing. A test that skipped
// instead would hide a security check behind a passing suite; the README's
// prerequisites list the tools and tools/prereqs.sh checks them all.
package prereqs
