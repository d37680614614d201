// Package dashboard holds the browser test of the fleet page (`flotilla
// dashboard`, `flotilla status -o html`): headless Chromium (Debian's
// chromium package) driven with chromedp against a real fleet of three
// testenv clusters, agents in process committing status to the real Git
// server, and a Volcano job run on kwok nodes; and the 1,000-cluster page
// benchmark. It is its own package so that only it links chromedp.
//
// go test ./test/dashboard -update-screenshots rewrites the screenshots
// under docs/images/ that docs/dashboard.md shows.
package dashboard
