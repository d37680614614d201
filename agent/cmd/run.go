package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/metrics"
	"github.com/flotilla-gitops/flotilla/agent/procmem"
	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/agent/truststate"
	"github.com/flotilla-gitops/flotilla/agent/volcano"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/version"
)

// ErrLeaderElectionLost: another replica took the lease while this one
// was reconciling; the process exits so that only one replica writes.
var ErrLeaderElectionLost = errors.New("leader election lost")

func newLogger(o *options, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.logLevel))
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if o.logFormat == "text" {
		h = slog.NewTextHandler(w, hopts)
	} else {
		h = slog.NewJSONHandler(w, hopts)
	}
	return slog.New(h)
}

// kubeConfig is the in-cluster configuration unless a kubeconfig or context
// is given, then the kubeconfig (explicit, $KUBECONFIG or ~/.kube/config).
func kubeConfig(o *options) (*rest.Config, error) {
	if o.kubeconfig == "" && o.kubeContext == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

func defaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "flotilla-agent"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "_" + hex.EncodeToString(b[:])
}

// run wires the agent and runs it until ctx ends (SIGTERM) or the lease is
// lost.
func run(ctx context.Context, o *options, stderr io.Writer) (err error) {
	log := newLogger(o, stderr)
	klog.SetSlogLogger(log.With("logger", "client-go"))
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	if o.identity == "" {
		o.identity = defaultIdentity()
	}
	log = log.With("identity", o.identity)

	restCfg, err := kubeConfig(o)
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = o.qps, o.burst
	restCfg.UserAgent = "flotilla-agent/" + version.Version
	// Lease renewals go through their own config, so the request counter
	// (and its zero-writes promise for an unchanged cluster) sees only
	// reconcile traffic.
	leaseCfg := rest.CopyConfig(restCfg)
	counter := &apply.WriteCounter{}
	counter.Wrap(restCfg)

	var auth gitrepo.Auth
	if o.credentialsDir != "" {
		if auth, err = gitrepo.LoadAuth(o.credentialsDir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(o.cacheDir, 0o755); err != nil {
		return fmt.Errorf("cache dir: %w", err)
	}
	// Why the agent exited before survives in the cache, so restarts on a
	// flaky API server show on the dashboard (flotilla_agent_restarts_total).
	exits, rerr := startExitRecord(o.cacheDir, time.Now())
	if rerr != nil {
		log.Warn("cannot record the agent's exit cause", "error", rerr)
	}
	defer func() {
		cause := exitCause(err, ctx.Err())
		if rerr == nil {
			if ferr := finishExitRecord(o.cacheDir, exits, cause, time.Now()); ferr != nil {
				log.Warn("cannot record the agent's exit cause", "cause", cause, "error", ferr)
			}
		}
	}()
	maxFetch, err := gitMaxFetchSize(o.gitMaxFetchSize)
	if err != nil {
		return err
	}
	src := &gitrepo.Source{
		URL: o.repoURL, Branch: o.branch, Auth: auth,
		CacheDir: filepath.Join(o.cacheDir, "git"), Timeout: o.timeout, Paths: o.sparseCheckout,
		MaxFetchSize: maxFetch, Ref: o.sliceRef(), RefOptional: o.gitTransport == transportAuto, Protocol: o.gitProtocol,
	}
	// One HTTP client, REST mapper and discovery client for everything that
	// reconciles: one connection pool, and each kind mapped once rather than
	// once per component. The client knows Volcano's types too.
	kube, err := apply.NewClients(restCfg, volcano.Scheme())
	if err != nil {
		return err
	}
	takeOver, err := takeOverManagers(o.takeOver)
	if err != nil {
		return fmt.Errorf("%w: --take-over-field-managers: %w", ErrConfig, err)
	}
	applier, err := apply.NewWithClients(kube, apply.Options{InventoryNamespace: o.namespace, Cluster: o.clusterName, TakeOver: takeOver})
	if err != nil {
		return err
	}
	jobs, err := volcano.NewManagerWithClients(kube, volcano.Options{Applier: applier, CompletedRetention: o.volcanoRetention})
	if err != nil {
		return err
	}
	disc := reconcile.NewKubeDiscoveryWithClient(kube.Discovery)
	m := metrics.New()
	m.SetRestarts(exits.Exits, exits.LastCause)
	if exits.LastCause != "" {
		log.Info("agent restarted", "lastExitCause", exits.LastCause, "lastExit", exits.LastExit, "exits", exits.Exits)
	}
	// Trust state (last accepted revision, strict verification's anchor)
	// lives in the cluster: the cache is an emptyDir, lost with the pod.
	store := &truststate.Store{Client: kube.Client, Namespace: o.namespace, Name: o.stateName, Branch: o.branch}
	verifier, err := newVerifier(o, src, store, m)
	if err != nil {
		return err
	}
	m.CountAPIRequests(counter)
	// Read once: the instance does not change while the agent runs.
	instance := statusInstanceID(ctx, kube.Client, log)
	statusWriter, err := newStatusWriter(o, auth, m.Registry(), instance)
	if err != nil {
		return err
	}
	runStatusWriter(ctx, statusWriter)

	helmMemory, err := helmWorkerMemory(o.helmWorkerMemory, containerMemoryLimit)
	if err != nil {
		return err
	}
	// The Helm workers may use the other half of the limit (helmWorkerMemory).
	goMemoryLimit, _ := procmem.SetLimit(0.5, containerMemoryLimit)
	loop, err := reconcile.New(reconcile.Config{
		Cluster: o.clusterName, Branch: o.branch,
		Source: src, Applier: applier, Discovery: disc, Verifier: verifier, Volcano: jobs, State: store,
		Sink: statusSink(o, statusWriter), Heartbeat: o.status.heartbeat, Previous: previousStatus(o, log),
		Metrics: m, Logger: log,
		Interval: o.interval, PollInterval: o.pollInterval, Workers: o.workers,
		PruneHoldFraction: o.pruneHoldFraction,
		Render: render.Options{
			Limits:    render.Limits{Timeout: o.renderTimeout, MaxHelmMemory: helmMemory},
			Decryptor: sopsKeyring(kube.Client, o.namespace, o.sopsAgeSecret),
		},
		ShutdownGrace: o.shutdownGrace,
		ReleaseMemory: func() { releaseMemory(log) },
		Identity:      o.identity, AgentVersion: version.Version,
		Secrets: append(secrets(auth, o.repoURL), statusSecrets(o)...),
	})
	if err != nil {
		return err
	}

	if o.requestName != "" {
		if err := watchReconcileRequests(ctx, leaseCfg, o.namespace, o.requestName, loop, log); err != nil {
			return fmt.Errorf("watch reconcile requests: %w", err)
		}
	}

	var leading atomic.Bool
	servers, err := startServers(o, m, loop, &leading, log)
	if err != nil {
		return err
	}
	defer servers.shutdown()

	log.Info("flotilla-agent starting", "version", version.String("flotilla-agent"), "cluster", o.clusterName,
		"repo", redact.New().String(o.repoURL), "branch", o.branch, "interval", o.interval, "namespace", o.namespace,
		"leaderElection", o.leaderElect, "credentials", auth.String(), "helmWorkerMemoryMiB", helmMemory>>20, "goMemoryLimitMiB", goMemoryLimit>>20)
	if !o.leaderElect {
		leading.Store(true)
		m.SetLeader(true)
		err = loop.Run(ctx)
	} else {
		err = runElected(ctx, o, leaseCfg, loop, m, &leading, log)
	}
	log.Info("flotilla-agent stopped", "error", errString(err))
	return err
}

// runElected runs the loop while this replica holds the lease. On ctx's
// end the loop stops first (finishing or cancelling its cycle), then the
// lease is released, so the next leader never overlaps a running cycle.
// Losing the lease ends run with ErrLeaderElectionLost at once.
func runElected(ctx context.Context, o *options, cfg *rest.Config, loop *reconcile.Loop, m *metrics.Metrics, leading *atomic.Bool, log *slog.Logger) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.namespace, Name: o.leaseName},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.identity},
	}
	// The elector has a context of its own: ctx's end must stop the loop
	// before the lease is released.
	leCtx, leCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer leCancel()
	loopDone := make(chan struct{})
	var started, lost atomic.Bool
	loopCtx, loopCancel := context.WithCancel(ctx)
	defer loopCancel()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				started.Store(true)
				leading.Store(true)
				m.SetLeader(true)
				log.Info("acquired the leader lease", "lease", o.namespace+"/"+o.leaseName)
				stop := context.AfterFunc(lctx, loopCancel)
				_ = loop.Run(loopCtx)
				stop()
				close(loopDone)
				leCancel()
			},
			OnStoppedLeading: func() {
				leading.Store(false)
				m.SetLeader(false)
				if ctx.Err() == nil {
					lost.Store(true)
					log.Error("lost the leader lease; stopping")
					loopCancel()
				}
			},
			OnNewLeader: func(identity string) {
				if identity != o.identity {
					log.Info("another replica leads", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elected := make(chan struct{})
	go func() {
		le.Run(leCtx)
		close(elected)
	}()
	select {
	case <-ctx.Done():
	case <-elected:
	}
	if lost.Load() {
		// Another replica may already be writing: stop now, whatever the
		// cycle is doing (the process exits).
		return ErrLeaderElectionLost
	}
	if started.Load() {
		<-loopDone
	}
	leCancel()
	<-elected
	if started.Load() {
		// Leadership came just as ctx ended; that loop stops at once.
		<-loopDone
	}
	if lost.Load() {
		return ErrLeaderElectionLost
	}
	return nil
}

type servers struct {
	list []*http.Server
}

func (s *servers) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range s.list {
		_ = srv.Shutdown(ctx)
	}
}

// startServers serves /metrics and the probes. /readyz is ready once a
// cycle reconciled a revision, and always on a replica that does not lead
// (it is standing by, healthy).
func startServers(o *options, m *metrics.Metrics, loop *reconcile.Loop, leading *atomic.Bool, log *slog.Logger) (*servers, error) {
	s := &servers{}
	listen := func(name, addr string, h http.Handler) error {
		if addr == "" || addr == "0" {
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			s.shutdown()
			return fmt.Errorf("listen %s: %w", addr, err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		s.list = append(s.list, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server failed", "addr", addr, "error", err)
			}
		}()
		log.Info("listening", "server", name, "addr", ln.Addr().String())
		return nil
	}
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", m.Handler())
	if err := listen("metrics", o.metricsAddr, metricsMux); err != nil {
		return nil, err
	}
	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	health.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if loop.Ready() || !leading.Load() {
			_, _ = io.WriteString(w, "ok\n")
			return
		}
		http.Error(w, "no cycle has reconciled a revision yet", http.StatusServiceUnavailable)
	})
	if err := listen("probes", o.healthAddr, health); err != nil {
		return nil, err
	}
	if o.pprofAddr != "" {
		prof := http.NewServeMux()
		prof.HandleFunc("/debug/pprof/", pprof.Index)
		prof.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		prof.HandleFunc("/debug/pprof/profile", pprof.Profile)
		prof.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		prof.HandleFunc("/debug/pprof/trace", pprof.Trace)
		if err := listen("pprof", o.pprofAddr, prof); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// secrets are the credential values the loop scrubs from messages.
func secrets(a gitrepo.Auth, repoURL string) []string {
	out := []string{a.Password, a.BearerToken}
	if u, err := url.Parse(repoURL); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
