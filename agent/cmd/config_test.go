package cmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/pkg/render"
)

// parse runs the same steps as the command: flags, environment, --config,
// then defaults and checks.
func parse(t *testing.T, args []string, env map[string]string) (*options, error) {
	t.Helper()
	o := &options{}
	f := pflag.NewFlagSet("flotilla-agent", pflag.ContinueOnError)
	o.bindFlags(f)
	if err := f.Parse(args); err != nil {
		return nil, err
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := applyEnv(f, lookup); err != nil {
		return o, err
	}
	if err := o.applyConfigFile(f); err != nil {
		return o, err
	}
	return o, o.finish(lookup)
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gitrepository.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const gitRepository = `apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: fleet
  namespace: flotilla-system
spec:
  url: https://git.example.com/fleet.git
  ref:
    branch: production
  interval: 5m
  timeout: 20s
  secretRef:
    name: fleet-auth
  sparseCheckout:
    - apps
    - charts
`

func TestConfigPrecedence(t *testing.T) {
	file := writeConfig(t, gitRepository)
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, o *options)
	}{
		{
			name: "defaults",
			args: []string{"--cluster-name", "c1", "--repo-url", "https://example.com/f.git"},
			check: func(t *testing.T, o *options) {
				if o.branch != "main" || o.interval != time.Minute || o.qps != 100 || o.burst != 300 || o.workers != 8 ||
					o.namespace == "" || o.statusFile != filepath.Join(defaultCacheDir, "status.yaml") || o.logFormat != "json" {
					t.Errorf("defaults: %+v", o)
				}
			},
		},
		{
			name: "environment",
			env: map[string]string{
				"FLOTILLA_CLUSTER_NAME": "edge-1", "FLOTILLA_REPO_URL": "ssh://git@example.com/f.git",
				"FLOTILLA_INTERVAL": "30s", "FLOTILLA_KUBE_API_QPS": "20", "FLOTILLA_LEADER_ELECT": "true",
				"FLOTILLA_NAMESPACE": "agents", "POD_NAME": "agent-0",
			},
			check: func(t *testing.T, o *options) {
				if o.clusterName != "edge-1" || o.repoURL != "ssh://git@example.com/f.git" || o.interval != 30*time.Second ||
					o.qps != 20 || !o.leaderElect || o.namespace != "agents" || o.identity != "agent-0" {
					t.Errorf("from environment: %+v", o)
				}
			},
		},
		{
			name: "flag beats environment",
			args: []string{"--cluster-name", "from-flag"},
			env:  map[string]string{"FLOTILLA_CLUSTER_NAME": "from-env", "FLOTILLA_REPO_URL": "https://example.com/f.git"},
			check: func(t *testing.T, o *options) {
				if o.clusterName != "from-flag" {
					t.Errorf("cluster name %q", o.clusterName)
				}
			},
		},
		{
			name: "config file",
			args: []string{"--cluster-name", "c1", "--config", file, "--git-credentials-root", "/secrets"},
			check: func(t *testing.T, o *options) {
				if o.repoURL != "https://git.example.com/fleet.git" || o.branch != "production" || o.interval != 5*time.Minute ||
					o.timeout != 20*time.Second || o.credentialsDir != "/secrets/fleet-auth" ||
					strings.Join(o.sparseCheckout, ",") != "apps,charts" {
					t.Errorf("from file: %+v", o)
				}
			},
		},
		{
			name: "flags and environment beat the config file",
			args: []string{"--cluster-name", "c1", "--config", file, "--interval", "2m", "--git-credentials-dir", "/creds"},
			env:  map[string]string{"FLOTILLA_BRANCH": "main"},
			check: func(t *testing.T, o *options) {
				if o.interval != 2*time.Minute || o.branch != "main" || o.credentialsDir != "/creds" || o.timeout != 20*time.Second {
					t.Errorf("overrides: %+v", o)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parse(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	base := []string{"--cluster-name", "c1", "--repo-url", "https://example.com/f.git"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want string
	}{
		{name: "missing cluster", args: []string{"--repo-url", "x"}, want: "--cluster-name is required"},
		{name: "missing repo", args: []string{"--cluster-name", "c"}, want: "--repo-url is required"},
		{name: "bad log format", args: append(base, "--log-format", "xml"), want: "--log-format"},
		{name: "bad log level", args: append(base, "--log-level", "loud"), want: "--log-level"},
		{name: "bad interval", args: append(base, "--interval", "0s"), want: "--interval"},
		{name: "prune hold fraction zero", args: append(base, "--prune-hold-fraction", "0"), want: "--prune-hold-fraction"},
		{name: "prune hold fraction above 1", args: append(base, "--prune-hold-fraction", "1.5"), want: "--prune-hold-fraction"},
		{name: "lease timings", args: append(base, "--leader-elect", "--leader-election-renew-deadline", "20s"), want: "lease duration > renew deadline"},
		{name: "bad git transport", args: append(base, "--git-transport", "carrier-pigeon"), want: "--git-transport"},
		{name: "bad git protocol", args: append(base, "--git-protocol", "v3"), want: "--git-protocol"},
		{name: "bad environment value", args: base, env: map[string]string{"FLOTILLA_WORKERS": "many"}, want: "FLOTILLA_WORKERS"},
		{name: "tag ref", file: strings.Replace(gitRepository, "branch: production", "tag: v1.0.0", 1), want: "only branch is supported"},
		{name: "wrong kind", file: strings.Replace(gitRepository, "kind: GitRepository", "kind: OCIRepository", 1), want: "apiVersion/kind"},
		{name: "unknown field", file: gitRepository + "  bogus: true\n", want: "bogus"},
		{name: "unsupported field", file: gitRepository + "  suspend: true\n", want: "spec.suspend: not supported"},
		{name: "secret name with a path", file: strings.Replace(gitRepository, "name: fleet-auth", "name: ../etc", 1), want: "want a plain name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = []string{"--cluster-name", "c1", "--config", writeConfig(t, tc.file)}
			}
			_, err := parse(t, args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %v is not ErrConfig", err)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	for flag, env := range map[string]string{
		"cluster-name":                   "FLOTILLA_CLUSTER_NAME",
		"kube-api-qps":                   "FLOTILLA_KUBE_API_QPS",
		"leader-election-lease-duration": "FLOTILLA_LEADER_ELECTION_LEASE_DURATION",
	} {
		if got := envName(flag); got != env {
			t.Errorf("envName(%q) = %q, want %q", flag, got, env)
		}
	}
}

func TestHelpHasExamples(t *testing.T) {
	c := NewRootCommand()
	if !strings.Contains(c.Example, "--leader-elect") || !strings.Contains(c.Long, "FLOTILLA_") {
		t.Errorf("help lacks examples or the environment: %s", c.Example)
	}
	for _, name := range []string{"cluster-name", "repo-url", "branch", "interval", "timeout", "git-credentials-dir", "cache-dir",
		"namespace", "kubeconfig", "context", "kube-api-qps", "kube-api-burst", "leader-elect", "metrics-addr", "health-addr",
		"log-level", "log-format", "config"} {
		if c.Flags().Lookup(name) == nil {
			t.Errorf("no --%s flag", name)
		}
	}
}

func TestHelmWorkerMemory(t *testing.T) {
	limited := func(n int64) func() (int64, bool) { return func() (int64, bool) { return n, true } }
	unlimited := func() (int64, bool) { return 0, false }
	perWorker := int64(2 * render.MaxWorkers())
	tests := []struct {
		flag  string
		limit func() (int64, bool)
		want  int64
		err   bool
	}{
		{flag: "auto", limit: limited(256 << 20), want: (256 << 20) / perWorker},
		{flag: "", limit: limited(1 << 30), want: (1 << 30) / perWorker},
		{flag: "auto", limit: unlimited, want: render.DefaultMaxHelmMemory},
		{flag: "96Mi", limit: limited(256 << 20), want: 96 << 20},
		{flag: "1G", limit: unlimited, want: 1_000_000_000},
		{flag: "lots", limit: unlimited, err: true},
		{flag: "-1Mi", limit: unlimited, err: true},
		{flag: "0", limit: unlimited, err: true},
	}
	for _, tc := range tests {
		got, err := helmWorkerMemory(tc.flag, tc.limit)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("helmWorkerMemory(%q) = %d, %v; want %d, error %v", tc.flag, got, err, tc.want, tc.err)
		}
	}
	// The shipped DaemonSet's limit leaves the agent half of it whatever
	// the number of workers: the worker bound trips before the OOM killer.
	if got, _ := helmWorkerMemory("auto", limited(256<<20)); got*int64(render.MaxWorkers()) > 128<<20 {
		t.Errorf("auto gives %d MiB per worker × %d workers, more than half of 256 MiB", got>>20, render.MaxWorkers())
	}
}
