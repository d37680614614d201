package statuswriter

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// t0 is when test documents changed their conditions.
var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

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

func agentAuth(srv *gitserver.Server, cluster string) gitrepo.Auth {
	user := gitserver.AgentUser(cluster)
	return gitrepo.Auth{Username: user, Password: srv.Password(user)}
}

// gitOut runs the git CLI against a bare repository.
func gitOut(t testing.TB, bare string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir=" + bare}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// readyDoc is a healthy document for cluster at revision rev.
func readyDoc(cluster, rev string, units ...string) *status.ClusterStatus {
	if len(units) == 0 {
		units = []string{"web"}
	}
	d := &status.ClusterStatus{
		Cluster:         cluster,
		Agent:           status.Agent{Version: "test"},
		DesiredRevision: rev, FetchedRevision: rev, AppliedRevision: rev,
		Conditions: readyConditions("Applied revision: " + rev),
	}
	for _, u := range units {
		d.Units = append(d.Units, status.UnitStatus{Name: u, Hash: "sha256:" + u, AppliedRevision: rev, Objects: 2,
			Conditions: readyConditions("")})
	}
	return d
}

func readyConditions(msg string) []metav1.Condition {
	return []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionTrue, Reason: status.ReasonSucceeded, Message: msg,
		LastTransitionTime: metav1.NewTime(t0)}}
}

// failUnit marks a unit of d as failed to apply with msg.
func failUnit(d *status.ClusterStatus, unit, reason, msg string) {
	for i := range d.Units {
		if d.Units[i].Name == unit {
			d.Units[i].LastError = msg
			d.Units[i].Conditions = []metav1.Condition{
				{Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(t0)},
				{Type: status.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(t0)},
			}
		}
	}
	d.AppliedRevision = ""
	d.Conditions = []metav1.Condition{{Type: status.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: "units " + unit + " not ready", LastTransitionTime: metav1.NewTime(t0)}}
}
