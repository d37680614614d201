package status

import (
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

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
	writeFiles(t, dir, files)
	return srv, srv.MustCreateRepo(t, "fleet", dir)
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
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

// sshKey returns a signer and its authorized_keys line.
func sshKey(t testing.TB, seed byte) (gitrepo.Signer, string) {
	t.Helper()
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed
	}
	priv := ed25519.NewKeyFromSeed(s)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gitrepo.ParseSigningKey(pem.EncodeToMemory(block), nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return signer, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
}

// readyDoc is a healthy document for cluster at revision rev.
func readyDoc(cluster, rev string, units ...string) *ClusterStatus {
	if len(units) == 0 {
		units = []string{"web"}
	}
	d := &ClusterStatus{
		Cluster:         cluster,
		Agent:           Agent{Version: "test"},
		DesiredRevision: rev, FetchedRevision: rev, AppliedRevision: rev,
		Conditions: readyConditions("Applied revision: " + rev),
	}
	for _, u := range units {
		d.Units = append(d.Units, UnitStatus{Name: u, Hash: "sha256:" + u, AppliedRevision: rev, Objects: 2,
			Conditions: readyConditions("")})
	}
	return d
}

func readyConditions(msg string) []metav1.Condition {
	return []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonSucceeded, Message: msg,
		LastTransitionTime: metav1.NewTime(t0)}}
}

// failUnit marks a unit of d as failed to apply with msg.
func failUnit(d *ClusterStatus, unit, reason, msg string) {
	for i := range d.Units {
		if d.Units[i].Name == unit {
			d.Units[i].LastError = msg
			d.Units[i].Conditions = []metav1.Condition{
				{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(t0)},
				{Type: ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(t0)},
			}
		}
	}
	d.AppliedRevision = ""
	d.Conditions = []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: "units " + unit + " not ready", LastTransitionTime: metav1.NewTime(t0)}}
}
