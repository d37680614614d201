// Package notify tells people where a merged change stands without
// polling: commit statuses on the fleet repo's forge (GitHub, GitLab and
// Gitea), one per application on main's head commit, computed from the
// status the agents commit to Git — pending while its clusters apply it,
// success once every cluster it targets is Ready at it, failure naming the
// failing clusters and why. Each status is sent once per change of its
// state: what was sent is recorded in the fleet repo itself, on a ref of
// its own (sent.go), so the rollout job and its schedule can both run
// notify without repeats.
// The forge's API is hub/forge.
package notify
