// Package gitea starts a real Gitea for tests, the forge the product's
// forge features (commit statuses, plan comments, webhooks) are tested
// against: bin/gitea (built from its Go module by `tools/build.sh bin
// gitea`, with SQLite) on loopback, one admin user with an API token, and
// repositories created and pushed through Gitea's own API and Git
// smart-HTTP. Gitea's API for commit statuses is GitHub's shape, so a
// GitHub client is exercised against it too.
package gitea
