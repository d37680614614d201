package statuswriter

import (
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// t0 is when test documents changed their conditions.
var t0 = statusdoc.T0

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// startForge starts a Git server with the forge's rules for clusters and
// a fleet repo "fleet" made of files.
func startForge(t testing.TB, files map[string]string, clusters ...string) (*gitserver.Server, string) {
	t.Helper()
	srv := gitserver.Start(t, gitserver.ForgeConfig(clusters...))
	dir := t.TempDir()
	if len(files) == 0 {
		files = map[string]string{"README.md": "fleet\n"}
	}
	treefile.Write(t, dir, files)
	return srv, srv.MustCreateRepo(t, "fleet", dir)
}
