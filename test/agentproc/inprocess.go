package agentproc

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/metrics"
	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// InProcessOptions configure an in-process agent. Zero values are the
// defaults said.
type InProcessOptions struct {
	// Cluster is the cluster's name in the fleet repo.
	Cluster string
	// RepoURL and Auth: the fleet repo, branch main.
	RepoURL string
	Auth    gitrepo.Auth
	// CacheDir holds the Git cache (git/) and, with the default sink,
	// status.yaml; a new temporary directory when empty.
	CacheDir string
	// Namespace of the inventories, created when missing.
	Namespace string
	// RESTConfig the applier uses; the cluster's admin config when nil.
	RESTConfig *rest.Config
	// Discovery gives the loop the cluster's discovery (Helm capabilities,
	// live versions); without it the loop has none.
	Discovery bool
	Metrics   *metrics.Metrics
	// Volcano, when set, makes the loop's Volcano job manager from its
	// applier; without it volcano units apply like manifests.
	Volcano func(*apply.Applier) (reconcile.Volcano, error)
	// Sink receives the status; a reconcile.FileSink at
	// StatusFile(CacheDir) when nil.
	Sink reconcile.StatusSink
	// Alongside run next to the loop between Start and Stop (a status
	// writer's Run).
	Alongside []func(context.Context) error
	// Interval between cycles; 3s.
	Interval time.Duration
	// PollInterval between Git polls within an interval
	// (reconcile.Config.PollInterval); the interval when zero.
	PollInterval time.Duration
	// Heartbeat: a running cycle publishes its progress every Heartbeat /
	// 2 (reconcile.Config.Heartbeat); the loop's default when zero.
	Heartbeat time.Duration
	// FetchTimeout bounds a Git fetch; 10s.
	FetchTimeout  time.Duration
	RenderTimeout time.Duration
	Workers       int
	// Identity goes into status; "e2e".
	Identity string
	// LogTail is how many of the log's last lines a failed test shows; 60.
	LogTail int
}

// InProcess is the agent's reconcile loop wired as the binary wires it, in
// this process; its JSON log (debug level) goes to Logs.
type InProcess struct {
	Loop     *reconcile.Loop
	Applier  *apply.Applier
	Logs     *Buffer
	CacheDir string

	alongside []func(context.Context) error
	mu        sync.Mutex
	cancel    context.CancelFunc
	done      chan struct{}
}

// NewInProcess wires the loop against cluster c; Start runs it. It is
// stopped when the test ends.
func NewInProcess(t testing.TB, c *testenv.Cluster, o InProcessOptions) *InProcess {
	t.Helper()
	if o.CacheDir == "" {
		o.CacheDir = t.TempDir()
	}
	if o.RESTConfig == nil {
		o.RESTConfig = c.RESTConfig()
	}
	if o.Interval == 0 {
		o.Interval = 3 * time.Second
	}
	if o.FetchTimeout == 0 {
		o.FetchTimeout = 10 * time.Second
	}
	if o.Identity == "" {
		o.Identity = "e2e"
	}
	if o.LogTail == 0 {
		o.LogTail = 60
	}
	if o.Sink == nil {
		o.Sink = reconcile.FileSink{Path: StatusFile(o.CacheDir)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.CreateNamespace(ctx, o.Namespace); err != nil {
		t.Fatal(err)
	}
	applier, err := apply.New(o.RESTConfig, apply.Options{InventoryNamespace: o.Namespace, Cluster: o.Cluster, PollInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var disc reconcile.Discovery
	if o.Discovery {
		if disc, err = reconcile.NewKubeDiscovery(o.RESTConfig); err != nil {
			t.Fatal(err)
		}
	}
	var jobs reconcile.Volcano
	if o.Volcano != nil {
		if jobs, err = o.Volcano(applier); err != nil {
			t.Fatal(err)
		}
	}
	logs := &Buffer{}
	// As the binary does: the status file an earlier process left in the
	// cache is the base of progress heartbeats until the first cycle ends.
	previous, _ := reconcile.ReadStatusFile(StatusFile(o.CacheDir))
	loop, err := reconcile.New(reconcile.Config{
		Cluster: o.Cluster,
		Source: &gitrepo.Source{URL: o.RepoURL, Branch: "main", Auth: o.Auth,
			CacheDir: filepath.Join(o.CacheDir, "git"), Timeout: o.FetchTimeout},
		Applier: applier, Discovery: disc, Volcano: jobs,
		Sink: o.Sink, Heartbeat: o.Heartbeat, Previous: previous,
		Metrics:  o.Metrics,
		Logger:   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Interval: o.Interval, PollInterval: o.PollInterval, Workers: o.Workers,
		Render:        render.Options{Limits: render.Limits{Timeout: o.RenderTimeout}},
		ShutdownGrace: 5 * time.Second,
		Identity:      o.Identity, AgentVersion: "e2e",
		Secrets: []string{o.Auth.Password},
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &InProcess{Loop: loop, Applier: applier, Logs: logs, CacheDir: o.CacheDir, alongside: o.Alongside}
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("agent %s logs (tail):\n%s", o.Cluster, Tail(logs.String(), o.LogTail))
			t.Logf("cluster under agent %s:\n%s", o.Cluster, c.Describe(context.Background()))
		}
	})
	return a
}

// Start runs the loop (and Alongside) in the background; it does nothing
// while they run.
func (a *InProcess) Start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		var wg sync.WaitGroup
		for _, run := range a.alongside {
			wg.Go(func() { _ = run(ctx) })
		}
		_ = a.Loop.Run(ctx)
		wg.Wait()
	}(a.done)
}

// Stop ends the loop (and Alongside) and waits for them.
func (a *InProcess) Stop() {
	a.mu.Lock()
	cancel, done := a.cancel, a.done
	a.cancel = nil
	a.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Buffer collects logs from concurrent writers.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// CredentialsDir writes a directory like a mounted Git credentials Secret
// (username, password) for the agent's --git-credentials-dir.
func CredentialsDir(t testing.TB, user, password string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]string{gitrepo.SecretUsername: user, gitrepo.SecretPassword: password} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
