// Package notify tells people where a merged change stands without
// polling, from the status the agents commit to Git:
//
//   - commit statuses on the fleet repo's forge (GitHub, GitLab and
//     Gitea; hub/forge), one per application on main's head commit —
//     pending while its clusters apply it, success once every cluster it
//     targets is Ready at it, failure naming the failing clusters, where a
//     rollout is held and why (commitstatus.go); an earlier commit left
//     pending follows the head while only rendered/ changed since
//     (follow.go);
//   - events to webhooks (generic JSON in Flux's event shape, generic-hmac,
//     Slack, Teams; webhook.go) configured by the fleet repo's Providers
//     and Alerts: facts about clusters and rollouts (events.go) are told
//     when they change (tell.go).
//
// Each status and each change of a fact is sent once: what was sent is
// recorded in the fleet repo itself, on a ref of its own, by
// compare-and-swap (sent.go), so the rollout job and its schedule can both
// run notify without repeats, and a failed send is given back for the
// next run.
package notify
