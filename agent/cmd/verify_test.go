package cmd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/agent/metrics"
	"github.com/flotilla-gitops/flotilla/agent/truststate"
	"github.com/flotilla-gitops/flotilla/agent/verify"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

func TestVerifyFlags(t *testing.T) {
	keys := t.TempDir()
	base := []string{"--cluster-name", "c", "--repo-url", "https://git.example.com/fleet.git", "--cache-dir", t.TempDir()}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		problem string // "" when valid
	}{
		{"off by default", nil, nil, ""},
		{"head with keys", []string{"--verify-mode", "head", "--verify-keys-dir", keys}, nil, ""},
		{"strict from the environment", nil, map[string]string{"FLOTILLA_VERIFY_MODE": "strict", "FLOTILLA_VERIFY_KEYS_DIR": keys}, ""},
		{"head without keys", []string{"--verify-mode", "head"}, nil, "needs --verify-keys-dir"},
		{"missing keys dir", []string{"--verify-mode", "strict", "--verify-keys-dir", filepath.Join(keys, "nope")}, nil, "not a directory"},
		{"unknown mode", []string{"--verify-mode", "all"}, nil, "want none, head or strict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, append(append([]string{}, base...), tc.args...), tc.env)
			switch {
			case tc.problem == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.problem != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.problem)):
				t.Errorf("err %v, want ErrConfig mentioning %q", err, tc.problem)
			}
		})
	}
}

func TestVerifyFromFluxGitRepository(t *testing.T) {
	root := t.TempDir()
	cfg := writeConfig(t, gitRepository+"  verify:\n    mode: HEAD\n    secretRef:\n      name: trusted-keys\n")
	args := []string{"--config", cfg, "--cluster-name", "c", "--cache-dir", t.TempDir(), "--git-credentials-root", root}
	// The keys directory must exist.
	if _, err := parse(t, args, nil); err == nil || !strings.Contains(err.Error(), filepath.Join(root, "trusted-keys")) {
		t.Fatalf("missing keys directory: %v", err)
	}
	if err := os.Mkdir(filepath.Join(root, "trusted-keys"), 0o755); err != nil {
		t.Fatal(err)
	}
	o, err := parse(t, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.verifyOpts.mode != "head" || o.verifyOpts.keysDir != filepath.Join(root, "trusted-keys") {
		t.Errorf("verify options %+v", o.verifyOpts)
	}
	// A flag wins over the file.
	if o, err := parse(t, append(args, "--verify-mode", "strict"), nil); err != nil || o.verifyOpts.mode != "strict" {
		t.Errorf("--verify-mode strict over spec.verify: %+v, %v", o, err)
	}
	tag := writeConfig(t, gitRepository+"  verify:\n    mode: Tag\n    secretRef:\n      name: trusted-keys\n")
	if _, err := parse(t, []string{"--config", tag, "--cluster-name", "c", "--git-credentials-root", root}, nil); err == nil || !strings.Contains(err.Error(), "only HEAD") {
		t.Errorf("mode Tag: %v", err)
	}
}

func TestVerifyTrustRootFlag(t *testing.T) {
	root := strings.Repeat("ab", 20)
	o, err := parse(t, []string{"--cluster-name", "c", "--repo-url", "https://git.example.com/fleet.git",
		"--verify-mode", "strict", "--verify-keys-dir", t.TempDir(), "--verify-trust-root", root}, nil)
	if err != nil || o.verifyOpts.trustRoot != root {
		t.Fatalf("--verify-trust-root: %+v, %v", o, err)
	}
	if _, err := parse(t, []string{"--cluster-name", "c", "--repo-url", "https://git.example.com/fleet.git",
		"--verify-mode", "strict", "--verify-keys-dir", t.TempDir(), "--verify-trust-root", "main"}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("--verify-trust-root main: %v, want ErrConfig", err)
	}
}

func TestNewVerifierRegistersTheFailureMetric(t *testing.T) {
	o := &options{verifyOpts: verifyOptions{mode: "head", keysDir: t.TempDir()}, cacheDir: t.TempDir()}
	m := metrics.New()
	v, err := newVerifier(o, &gitrepo.Source{URL: "https://git.example.com/fleet.git", CacheDir: t.TempDir()}, &truststate.Store{}, m)
	if err != nil || v == nil {
		t.Fatalf("newVerifier: %v, %v", v, err)
	}
	// Every reason has a series from the start.
	if n := len(failureSeries(t, m)); n != len(verify.Reasons) {
		t.Errorf("%d series, want %d", n, len(verify.Reasons))
	}
	// An empty keys directory refuses, and counts.
	if _, err := v.Verify(t.Context(), gitrepo.Result{Hash: strings.Repeat("a", 40)}); !errors.Is(err, verify.ErrRefused) {
		t.Fatalf("Verify: %v", err)
	}
	if got := failureSeries(t, m)[verify.ReasonKeysUnavailable]; got != 1 {
		t.Errorf("flotilla_verification_failures_total{reason=keys_unavailable} = %v, want 1", got)
	}
	o.verifyOpts.mode = "none"
	if v, err := newVerifier(o, nil, nil, m); v != nil || err != nil {
		t.Errorf("mode none: %v, %v", v, err)
	}
}

// failureSeries reads flotilla_verification_failures_total by reason.
func failureSeries(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "flotilla_verification_failures_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			out[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	return out
}
