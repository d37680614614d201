// Package forge is the fleet repo's forge API, for what people read
// there: commit statuses (hub/notify) and the plan's sticky comment on a
// pull or merge request (flotilla plan). GitHub (and GitHub Enterprise),
// GitLab and Gitea, whose API for both is GitHub's shape under /api/v1.
// Plain HTTP with a timeout per request; the token goes in a header and
// never into an error or a log.
package forge
