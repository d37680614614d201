package apply

import (
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// WriteCounter counts the API requests made through the rest.Configs it
// wraps, split into writes (mutating requests that are not dry-runs),
// dry-runs and reads (GET, LIST and WATCH are all GET). Tests and
// benchmarks use it to assert that an unchanged unit costs no writes.
// The zero value is ready to use and safe for concurrent use.
type WriteCounter struct {
	writes, dryRuns, reads atomic.Int64
}

// Wrap makes every client built from cfg count its requests here. It
// chains after any transport wrapper cfg already has.
func (c *WriteCounter) Wrap(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, c: c}
	})
}

// Writes returns the number of mutating, non-dry-run requests so far.
func (c *WriteCounter) Writes() int64 { return c.writes.Load() }

// DryRuns returns the number of dry-run mutating requests so far.
func (c *WriteCounter) DryRuns() int64 { return c.dryRuns.Load() }

// Reads returns the number of GET/HEAD requests (including lists and
// watches) so far.
func (c *WriteCounter) Reads() int64 { return c.reads.Load() }

// Reset sets every count back to zero.
func (c *WriteCounter) Reset() {
	c.writes.Store(0)
	c.dryRuns.Store(0)
	c.reads.Store(0)
}

type countingTransport struct {
	next http.RoundTripper
	c    *WriteCounter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		t.c.reads.Add(1)
	default:
		if isDryRun(req) {
			t.c.dryRuns.Add(1)
		} else {
			t.c.writes.Add(1)
		}
	}
	return t.next.RoundTrip(req)
}

// isDryRun reports a dryRun=All query parameter, the only dry-run value the
// API server accepts.
func isDryRun(req *http.Request) bool {
	for _, v := range req.URL.Query()["dryRun"] {
		if strings.EqualFold(v, "All") {
			return true
		}
	}
	return false
}
