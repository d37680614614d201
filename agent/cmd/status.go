package cmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/agent/statuswriter"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// statusDisabled as --status-repo-url turns Git status off (the document
// is then only written to --status-file).
const statusDisabled = "none"

// statusOptions configure the status commits (agent/statuswriter.Writer).
type statusOptions struct {
	repoURL           string
	shards            int
	credentialsDir    string
	heartbeat         time.Duration
	signingKeyFile    string
	signingPassphrase string
	maxHistory        int
	pushTimeout       time.Duration
	takeOver          bool
	resolvedURL       string // repoURL with {shard} resolved, set by problems
}

func (s *statusOptions) bind(f *pflag.FlagSet) {
	f.StringVar(&s.repoURL, "status-repo-url", "", `where status is committed, to refs/heads/flotilla/status/<cluster> (default: the fleet repo); {shard} is replaced by the cluster's shard (see --status-shards); "none" disables Git status`)
	f.IntVar(&s.shards, "status-shards", 1, "number of status repos {shard} ranges over (a stable hash of the cluster name picks one)")
	f.StringVar(&s.credentialsDir, "status-git-credentials-dir", "", "credentials for the status repo, as --git-credentials-dir (default: the fleet repo's)")
	f.DurationVar(&s.heartbeat, "heartbeat-interval", status.DefaultHeartbeatInterval, "commit an unchanged status this often (±10%), so the hub can tell the agent is alive; keep it at or below the fleets' healthCheck.interval")
	f.StringVar(&s.signingKeyFile, "status-signing-key-file", "", "sign status commits with this OpenPGP or SSH private key (the cluster's spec.statusKeys must hold its public key)")
	f.StringVar(&s.signingPassphrase, "status-signing-key-passphrase-file", "", "file holding the signing key's passphrase, if it has one")
	f.IntVar(&s.maxHistory, "status-max-history", statuswriter.DefaultMaxHistory, "squash the status ref into one commit when it would hold more commits (0: never)")
	f.DurationVar(&s.pushTimeout, "status-timeout", statuswriter.DefaultPushTimeout, "timeout of each Git operation of a status push")
	f.BoolVar(&s.takeOver, "status-take-over", false, "overwrite the status ref even while it holds a live document of another cluster instance (a re-installed cluster that cannot wait for the old instance's heartbeat to go stale)")
}

// problems checks the flags and resolves the status repo URL.
func (s *statusOptions) problems(cluster, fleetRepoURL string) []string {
	var out []string
	if s.repoURL == statusDisabled {
		return nil
	}
	if s.heartbeat <= 0 {
		out = append(out, "--heartbeat-interval must be positive")
	}
	if s.maxHistory < 0 {
		out = append(out, "--status-max-history must not be negative")
	}
	if s.pushTimeout <= 0 {
		out = append(out, "--status-timeout must be positive")
	}
	tmpl := s.repoURL
	if tmpl == "" {
		if s.shards > 1 {
			out = append(out, "--status-shards needs --status-repo-url with a {shard} placeholder")
		}
		tmpl = fleetRepoURL
	}
	if cluster != "" && tmpl != "" {
		u, err := status.ShardURL(tmpl, cluster, s.shards)
		if err != nil {
			out = append(out, "--status-repo-url: "+err.Error())
		}
		s.resolvedURL = u
	}
	return out
}

// newStatusWriter builds the Git status writer, or nil when Git status is
// disabled. fleetAuth is used when no status credentials are given.
// instanceID is the cluster instance (see clusterInstanceID); "" skips the
// check against another instance's document.
func newStatusWriter(o *options, fleetAuth gitrepo.Auth, reg prometheus.Registerer, instanceID string) (*statuswriter.Writer, error) {
	s := &o.status
	if s.repoURL == statusDisabled {
		return nil, nil
	}
	if s.resolvedURL == "" {
		if p := s.problems(o.clusterName, o.repoURL); len(p) > 0 {
			return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(p, "; "))
		}
	}
	auth := fleetAuth
	if s.credentialsDir != "" {
		a, err := gitrepo.LoadAuth(s.credentialsDir)
		if err != nil {
			return nil, fmt.Errorf("status credentials: %w", err)
		}
		auth = a
	}
	var signer signature.Signer
	if s.signingKeyFile != "" {
		key, err := os.ReadFile(s.signingKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --status-signing-key-file: %w", ErrConfig, err)
		}
		var pass []byte
		if s.signingPassphrase != "" {
			if pass, err = os.ReadFile(s.signingPassphrase); err != nil {
				return nil, fmt.Errorf("%w: --status-signing-key-passphrase-file: %w", ErrConfig, err)
			}
			pass = []byte(strings.TrimRight(string(pass), "\r\n"))
		}
		if signer, err = signature.ParseSigningKey(key, pass); err != nil {
			return nil, fmt.Errorf("%w: --status-signing-key-file: %w", ErrConfig, err)
		}
	}
	maxHistory := s.maxHistory
	if maxHistory == 0 {
		maxHistory = -1 // the flag's 0 means never squash
	}
	return statuswriter.NewWriter(statuswriter.WriterOptions{
		Cluster: o.clusterName, URL: s.resolvedURL, Auth: auth, Timeout: s.pushTimeout,
		HeartbeatInterval: s.heartbeat, MaxHistory: maxHistory, Signer: signer, Registerer: reg,
		InstanceID: instanceID, TakeOver: s.takeOver,
	})
}

// clusterInstanceID is the UID of the cluster's kube-system namespace: it
// lives as long as the cluster, so it tells two clusters given the same
// name apart, and a re-install from the cluster it replaces.
func clusterInstanceID(ctx context.Context, c ctrlclient.Reader) (string, error) {
	var ns corev1.Namespace
	if err := c.Get(ctx, ctrlclient.ObjectKey{Name: metav1.NamespaceSystem}, &ns); err != nil {
		return "", fmt.Errorf("cluster instance (namespace %s): %w", metav1.NamespaceSystem, err)
	}
	return string(ns.UID), nil
}

// statusInstanceID is the instance ID status is written with: the
// cluster's (clusterInstanceID), or "" with a warning when it cannot be
// read (RBAC without get on kube-system, say). The agent runs either way.
func statusInstanceID(ctx context.Context, c ctrlclient.Reader, log *slog.Logger) string {
	instance, err := clusterInstanceID(ctx, c)
	if err != nil {
		log.Warn("status is written without an instance ID: another agent using this cluster name will not be detected", "error", err)
		return ""
	}
	return instance
}

// statusSink is where the loop publishes: --status-file, and the status
// ref when Git status is enabled.
func statusSink(o *options, w *statuswriter.Writer) reconcile.StatusSink {
	file := reconcile.FileSink{Path: o.statusFile}
	if w == nil {
		return file
	}
	return reconcile.Sinks{file, w}
}

// runStatusWriter keeps heartbeats going and retries a buffered document
// until ctx ends (the loop's last Publish, on shutdown, still pushes).
func runStatusWriter(ctx context.Context, w *statuswriter.Writer) {
	if w != nil {
		go func() { _ = w.Run(ctx) }()
	}
}

// statusSecrets are credential values of the status repo to scrub from
// messages.
func statusSecrets(o *options) []string {
	if o.status.credentialsDir == "" {
		return nil
	}
	a, err := gitrepo.LoadAuth(o.status.credentialsDir)
	if err != nil {
		return nil
	}
	return []string{a.Password, a.BearerToken}
}

// previousStatus is the document in --status-file, which an earlier
// process of this pod wrote (the cache survives container restarts): the
// base of progress heartbeats until the first cycle ends. nil when absent.
func previousStatus(o *options, log *slog.Logger) *status.ClusterStatus {
	st, err := reconcile.ReadStatusFile(o.statusFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Warn("cannot read the previous status document", "file", o.statusFile, "error", err)
		}
		return nil
	}
	return st
}
