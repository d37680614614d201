// Package dashboard owns the fleet's web page: `flotilla dashboard` serves
// it and `flotilla status -o html` writes it as one file. It shows what
// hub/fleetview reads from Git (a Snapshot), nothing else: no cluster is
// contacted and the page needs no credentials beyond the fleet repo's.
//
// NewModel turns a snapshot (and the waves of progressive rollouts, when
// the caller has them) into the page's model: every cluster's state with
// its units (revision, health, last error, drift corrections), the
// rollout of the branch head, the Volcano jobs and the heartbeat ages.
// Every free-text field passes redact.Text again on the way in: the
// agents' writer redacts before committing, but a status ref is written by
// whoever holds its credentials, and a page is published further than Git.
//
// WritePage renders the whole page with html/template, its CSS and
// JavaScript embedded in the binary (go:embed) and inlined, so the file
// stands alone and no build step or CDN is involved. WriteFragment renders
// the part that changes; Server serves the page, the fragment and the
// model as JSON, re-reading the fleet in the background every refresh
// interval, and the page's script swaps the fragment in on that interval
// without reloading (filters and open details survive the swap).
//
// Filters (fleet, label, state) run in the page on data attributes of
// each cluster's rows. States are text with a symbol, colour only
// repeats them; tables have captions and scoped headers; the refreshed
// region is aria-live.
//
// Metrics (metrics.go) turn the progressive rollouts of each read into
// Prometheus gauges (flotilla_rollout_*), which Server serves at
// /metrics when it has them: wave progress for dashboards and alerts
// (manifests/monitoring/rollout-rules.yaml).
//
// CommitLinker links a revision to its commit on a known forge (github.com,
// gitlab.com) derived from the fleet repo's remote URL, or on any forge
// from a URL template; a local directory gets no links.
package dashboard
