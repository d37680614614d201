package cmd

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/ssa"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/spf13/pflag"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/agent/truststate"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

// EnvPrefix: every flag can be set from the environment as
// FLOTILLA_<FLAG_NAME> (upper case, dashes as underscores).
const EnvPrefix = "FLOTILLA_"

// Defaults.
const (
	defaultNamespace       = "flotilla-system"
	defaultCacheDir        = "/var/cache/flotilla"
	defaultCredentialsRoot = "/etc/flotilla/git-credentials"
	defaultLeaseName       = "flotilla-agent"
	serviceAccountNSFile   = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// ErrConfig classifies configuration errors.
var ErrConfig = errors.New("invalid configuration")

// options are the agent's settings, from flags, environment and --config.
type options struct {
	configFile string

	clusterName     string
	repoURL         string
	branch          string
	interval        time.Duration
	pollInterval    time.Duration
	timeout         time.Duration
	credentialsDir  string
	credentialsRoot string
	sparseCheckout  []string
	gitTransport    string
	gitProtocol     string
	cacheDir        string
	statusFile      string

	namespace   string
	kubeconfig  string
	kubeContext string
	qps         float32
	burst       int
	workers     int
	// pruneHoldFraction: see reconcile.Config.PruneHoldFraction.
	pruneHoldFraction float64
	// takeOver is --take-over-field-managers, resolved by takeOverManagers.
	takeOver []string

	leaderElect   bool
	leaseName     string
	stateName     string
	requestName   string
	sopsAgeSecret string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	identity      string

	metricsAddr   string
	healthAddr    string
	pprofAddr     string
	logLevel      string
	logFormat     string
	shutdownGrace time.Duration
	renderTimeout time.Duration
	// helmWorkerMemory is --helm-worker-memory, resolved by helmWorkerMemory.
	helmWorkerMemory string
	// gitMaxFetchSize is --git-max-fetch-size, resolved by gitMaxFetchSize.
	gitMaxFetchSize string
	// volcanoRetention keeps finished Volcano jobs whose unit left the
	// slice (agent/volcano).
	volcanoRetention time.Duration

	// verify is spec.verify of the --config file (commit signature
	// verification, agent/verify).
	verify *sourcev1.GitRepositoryVerification
	// verifyOpts are the --verify-* flags (verify.go).
	verifyOpts verifyOptions
	// status are the --status-* and --heartbeat-interval flags (status.go).
	status statusOptions
}

func (o *options) bindFlags(f *pflag.FlagSet) {
	f.StringVar(&o.configFile, "config", "", "a Flux GitRepository (source.toolkit.fluxcd.io/v1) YAML file giving the repository settings; flags and environment override it")

	f.StringVar(&o.clusterName, "cluster-name", "", "this cluster's name in the fleet repo (required)")
	f.StringVar(&o.repoURL, "repo-url", "", "fleet repo URL, https:// or ssh:// (required)")
	f.StringVar(&o.branch, "branch", "main", "branch to follow")
	f.DurationVar(&o.interval, "interval", time.Minute, "reconcile interval (drift correction), jittered by ±10%")
	f.DurationVar(&o.pollInterval, "poll-interval", 0, "how often to poll Git for a new commit between cycles and during health waits (0: once per --interval); a new commit starts a cycle at once, ending the waits of the running one when it changes this cluster's units. After failed polls the wait backs off: 1-2x this after one failure, doubling (jittered) with each further one, up to --interval; a successful poll resets it")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "timeout of each Git operation")
	f.StringVar(&o.credentialsDir, "git-credentials-dir", "", "directory of a mounted Secret with the Git credentials (files username, password, bearerToken, identity, known_hosts, ca.crt)")
	f.StringVar(&o.credentialsRoot, "git-credentials-root", defaultCredentialsRoot, "where --config's spec.secretRef.name is looked up: the credentials directory is <root>/<name>")
	f.StringVar(&o.gitMaxFetchSize, "git-max-fetch-size", "512Mi", "largest pack one Git fetch may download, as a quantity (e.g. 512Mi); a larger fetch fails and the last good revision stays applied")
	f.StringVar(&o.gitTransport, "git-transport", transportAuto, "what the agent fetches: slice (the ref refs/flotilla/slices/<cluster-name> that flotilla publish cuts from each commit of --branch after merge: only this cluster's slice and the sources it reads, checked against that commit, whose signature --verify-mode verifies), branch (the whole tree of --branch, whose size grows with the fleet), or auto (the slice ref when the remote has it, else the branch)")
	f.StringVar(&o.gitProtocol, "git-protocol", "auto", "Git protocol over HTTP(S): auto (v2 when the server speaks it: a poll is one ls-refs of one ref, a few hundred bytes whatever the repository's refs), v2, or v0 (a poll downloads every ref's advertisement); SSH uses v0")
	f.StringSliceVar(&o.sparseCheckout, "sparse-checkout", nil, "check out only these repo paths (comma separated; default: the whole tree); they must hold the cluster's slice and every source its units use")
	f.StringVar(&o.cacheDir, "cache-dir", defaultCacheDir, "on-disk Git cache and checkouts; keep it on a volume so a restarted agent works offline")
	f.StringVar(&o.statusFile, "status-file", "", "where each cycle's status document is written (default <cache-dir>/status.yaml)")

	f.StringVar(&o.namespace, "namespace", "", "the agent's namespace: unit inventories and the leader Lease live here (default: the pod's namespace, else "+defaultNamespace+")")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster configuration, else $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.kubeContext, "context", "", "kubeconfig context (default: the current context)")
	f.Float32Var(&o.qps, "kube-api-qps", 100, "maximum queries per second to the Kubernetes API")
	f.IntVar(&o.burst, "kube-api-burst", 300, "maximum burst of queries to the Kubernetes API")
	f.IntVar(&o.workers, "workers", 8, "units rendered and applied in parallel")
	f.Float64Var(&o.pruneHoldFraction, "prune-hold-fraction", reconcile.DefaultPruneHoldFraction, "when the units leaving the slice are all the managed units or more than this fraction of them (0 < f ≤ 1), they are not pruned until the slice is marked decommission (flotilla cluster decommission)")

	f.StringSliceVar(&o.takeOver, "take-over-field-managers", defaultTakeOver(), "field managers whose changes drift correction undoes, as name:Apply or name:Update (a name prefix; =name for an exact name), comma separated: their fields outside metadata (an env var added by kubectl edit, a port changed by kubectl patch) count as drift and are taken over before the object is applied again; labels and annotations they set stay (empty: none)")

	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader on a Lease so that only one replica reconciles")
	f.StringVar(&o.leaseName, "leader-election-id", defaultLeaseName, "name of the leader Lease in --namespace")
	f.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a lease is valid; a dead leader is replaced after at most this")
	f.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up (and exits)")
	f.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often candidates try to acquire or renew the lease")
	f.StringVar(&o.identity, "identity", "", "this replica's identity in the Lease and in status (default: $POD_NAME, else hostname with a random suffix)")
	f.StringVar(&o.sopsAgeSecret, "sops-age-secret", defaultSopsAgeSecret, "name of the Secret in --namespace whose key "+sopsAgeKey+" holds this cluster's age identity, used to decrypt SOPS-encrypted files; without it, units reading encrypted files fail with DecryptionFailed (\"\": never decrypt)")
	f.StringVar(&o.stateName, "state-configmap", truststate.DefaultName, "name of the ConfigMap in --namespace holding the agent's trust state, shared by its replicas: the last accepted revision and strict verification's anchor")
	f.StringVar(&o.requestName, "reconcile-request-configmap", defaultRequestConfigMap, "name of the ConfigMap in --namespace the agent watches for reconcile requests: each new value of its annotation "+AnnotationReconcileRequestedAt+" starts a cycle at once (\"\": do not watch)")

	f.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "address of the Prometheus /metrics endpoint (\"0\" disables it)")
	f.StringVar(&o.healthAddr, "health-addr", ":9440", "address of the /healthz and /readyz probes (\"0\" disables it)")
	f.StringVar(&o.pprofAddr, "pprof-addr", "", "address of the Go profiler's /debug/pprof/ endpoints (default: disabled; keep it on localhost)")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "json", "log format: json or text")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 30*time.Second, "on SIGTERM, how long the current cycle may go on before it is cancelled")
	f.DurationVar(&o.renderTimeout, "render-timeout", 30*time.Second, "timeout of rendering one unit")
	f.StringVar(&o.helmWorkerMemory, "helm-worker-memory", autoMemory, "resident memory at which a Helm template worker is stopped and its unit fails, as a quantity (e.g. 128Mi); auto: the container's memory limit divided by twice the number of workers, 1Gi without a limit")
	f.DurationVar(&o.volcanoRetention, "volcano-completed-retention", time.Hour, "how long a finished Volcano job whose GlobalJob left the cluster's slice is kept before it is deleted")
	o.verifyOpts.bindFlags(f)
	o.status.bind(f)
}

// envName is the environment variable of a flag.
func envName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// FLOTILLA_* variable. A set flag counts as Changed, so it overrides --config.
func applyEnv(f *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []error
	f.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed {
			return
		}
		v, ok := lookup(envName(fl.Name))
		if !ok {
			return
		}
		if err := f.Set(fl.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrConfig, envName(fl.Name), err))
		}
	})
	return errors.Join(errs...)
}

// applyConfigFile reads --config and sets every setting it holds whose
// flag was not given (on the command line or in the environment).
func (o *options) applyConfigFile(f *pflag.FlagSet) error {
	if o.configFile == "" {
		return nil
	}
	data, err := os.ReadFile(o.configFile)
	if err != nil {
		return fmt.Errorf("%w: --config: %w", ErrConfig, err)
	}
	fc, err := parseGitRepository(data)
	if err != nil {
		return fmt.Errorf("%w: --config %s: %w", ErrConfig, o.configFile, err)
	}
	set := func(flag string, apply func()) {
		if !f.Changed(flag) {
			apply()
		}
	}
	if fc.url != "" {
		set("repo-url", func() { o.repoURL = fc.url })
	}
	if fc.branch != "" {
		set("branch", func() { o.branch = fc.branch })
	}
	if fc.interval > 0 {
		set("interval", func() { o.interval = fc.interval })
	}
	if fc.timeout > 0 {
		set("timeout", func() { o.timeout = fc.timeout })
	}
	if fc.secretName != "" {
		set("git-credentials-dir", func() { o.credentialsDir = filepath.Join(o.credentialsRoot, fc.secretName) })
	}
	if len(fc.sparse) > 0 {
		set("sparse-checkout", func() { o.sparseCheckout = fc.sparse })
	}
	o.verify = fc.verify
	return o.applyFluxVerify(f)
}

// fileConfig is what a GitRepository file sets.
type fileConfig struct {
	url, branch       string
	interval, timeout time.Duration
	secretName        string
	sparse            []string
	verify            *sourcev1.GitRepositoryVerification
}

// parseGitRepository decodes a Flux GitRepository and keeps the fields the
// agent understands, refusing those it would otherwise silently ignore.
func parseGitRepository(data []byte) (fileConfig, error) {
	var gr sourcev1.GitRepository
	if err := yaml.UnmarshalStrict(data, &gr); err != nil {
		return fileConfig{}, err
	}
	if gr.APIVersion != sourcev1.GroupVersion.String() || gr.Kind != sourcev1.GitRepositoryKind {
		return fileConfig{}, fmt.Errorf("apiVersion/kind %s/%s, want %s/%s", gr.APIVersion, gr.Kind, sourcev1.GroupVersion, sourcev1.GitRepositoryKind)
	}
	s := gr.Spec
	fc := fileConfig{url: s.URL, interval: s.Interval.Duration, sparse: s.SparseCheckout, verify: s.Verification}
	if s.Timeout != nil {
		fc.timeout = s.Timeout.Duration
	}
	if r := s.Reference; r != nil {
		if r.Tag != "" || r.SemVer != "" || r.Name != "" || r.Commit != "" {
			return fileConfig{}, errors.New("spec.ref: only branch is supported (the agent follows a branch head)")
		}
		fc.branch = r.Branch
	}
	if s.SecretRef != nil {
		name := s.SecretRef.Name
		if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return fileConfig{}, fmt.Errorf("spec.secretRef.name %q: want a plain name", name)
		}
		fc.secretName = name
	}
	for _, p := range s.SparseCheckout {
		c := path.Clean(strings.Trim(p, "/"))
		if c == ".." || strings.HasPrefix(c, "../") {
			return fileConfig{}, fmt.Errorf("spec.sparseCheckout %q: not a path inside the repository", p)
		}
	}
	unsupported := map[string]bool{
		"spec.provider":           s.Provider != "" && s.Provider != sourcev1.GitProviderGeneric,
		"spec.serviceAccountName": s.ServiceAccountName != "",
		"spec.proxySecretRef":     s.ProxySecretRef != nil,
		"spec.ignore":             s.Ignore != nil,
		"spec.suspend":            s.Suspend,
		"spec.recurseSubmodules":  s.RecurseSubmodules,
		"spec.include":            len(s.Include) > 0,
	}
	var bad []string
	for field, set := range unsupported {
		if set {
			bad = append(bad, field)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fileConfig{}, fmt.Errorf("%s: not supported by flotilla-agent", strings.Join(bad, ", "))
	}
	return fc, nil
}

// finish fills computed defaults and checks the settings.
func (o *options) finish(lookup func(string) (string, bool)) error {
	if o.namespace == "" {
		if b, err := os.ReadFile(serviceAccountNSFile); err == nil && strings.TrimSpace(string(b)) != "" {
			o.namespace = strings.TrimSpace(string(b))
		} else {
			o.namespace = defaultNamespace
		}
	}
	if o.statusFile == "" {
		o.statusFile = filepath.Join(o.cacheDir, "status.yaml")
	}
	if o.identity == "" {
		if v, ok := lookup("POD_NAME"); ok && v != "" {
			o.identity = v
		}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if o.clusterName == "" {
		bad("--cluster-name is required")
	}
	if o.repoURL == "" {
		bad("--repo-url is required (or spec.url in --config)")
	}
	if o.branch == "" {
		bad("--branch must not be empty")
	}
	if o.interval <= 0 {
		bad("--interval must be positive")
	}
	if o.pollInterval < 0 {
		bad("--poll-interval must not be negative")
	}
	if o.timeout <= 0 {
		bad("--timeout must be positive")
	}
	switch o.gitTransport {
	case transportAuto, transportBranch, transportSlice:
	default:
		bad("--git-transport %q: want auto, branch or slice", o.gitTransport)
	}
	if err := gitrepo.ValidProtocol(o.gitProtocol); err != nil {
		bad("--git-protocol: %v", err)
	}
	if o.cacheDir == "" {
		bad("--cache-dir is required")
	}
	if o.qps <= 0 || o.burst <= 0 {
		bad("--kube-api-qps and --kube-api-burst must be positive")
	}
	if o.workers <= 0 {
		bad("--workers must be positive")
	}
	if o.stateName == "" {
		bad("--state-configmap must not be empty")
	}
	if !(o.pruneHoldFraction > 0 && o.pruneHoldFraction <= 1) {
		bad("--prune-hold-fraction must be in (0, 1]")
	}
	if o.leaderElect {
		if o.leaseName == "" {
			bad("--leader-election-id must not be empty")
		}
		if !(o.leaseDuration > o.renewDeadline && o.renewDeadline > o.retryPeriod && o.retryPeriod > 0) {
			bad("leader election needs lease duration > renew deadline > retry period > 0")
		}
	}
	switch o.logLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	switch o.logFormat {
	case "json", "text":
	default:
		bad("--log-format %q: want json or text", o.logFormat)
	}
	if o.shutdownGrace < 0 || o.renderTimeout < 0 || o.volcanoRetention < 0 {
		bad("--shutdown-grace, --render-timeout and --volcano-completed-retention must not be negative")
	}
	if _, err := helmWorkerMemory(o.helmWorkerMemory, func() (int64, bool) { return 0, false }); err != nil {
		bad("%v", err)
	}
	if _, err := gitMaxFetchSize(o.gitMaxFetchSize); err != nil {
		bad("%v", err)
	}
	if _, err := takeOverManagers(o.takeOver); err != nil {
		bad("--take-over-field-managers: %v", err)
	}
	problems = append(problems, o.verifyProblems()...)
	problems = append(problems, o.status.problems(o.clusterName, o.repoURL)...)
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(problems, "; "))
	}
	return nil
}

// defaultTakeOver is apply.DefaultTakeOver in --take-over-field-managers'
// syntax.
func defaultTakeOver() []string {
	out := make([]string, len(apply.DefaultTakeOver))
	for i, m := range apply.DefaultTakeOver {
		out[i] = m.Name + ":" + string(m.OperationType)
		if m.ExactMatch {
			out[i] = "=" + out[i]
		}
	}
	return out
}

// takeOverManagers parses --take-over-field-managers; an empty list takes
// over nothing (a nil one would mean apply's defaults).
func takeOverManagers(flags []string) ([]ssa.FieldManager, error) {
	out := []ssa.FieldManager{}
	for _, s := range flags {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		m, err := apply.ParseFieldManager(s)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// --git-transport values.
const (
	transportAuto   = "auto"
	transportBranch = "branch"
	transportSlice  = "slice"
)

// sliceRef is the ref the agent follows with --git-transport slice or
// auto, "" for the branch.
func (o *options) sliceRef() string {
	if o.gitTransport == transportBranch {
		return ""
	}
	return gitrepo.SliceRef(o.clusterName)
}
