package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/spf13/pflag"

	"github.com/flotilla-gitops/flotilla/agent/metrics"
	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	"github.com/flotilla-gitops/flotilla/agent/truststate"
	"github.com/flotilla-gitops/flotilla/agent/verify"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

// verifyOptions are the commit signature verification settings.
type verifyOptions struct {
	mode      string
	keysDir   string
	trustRoot string
}

func (v *verifyOptions) bindFlags(f *pflag.FlagSet) {
	f.StringVar(&v.mode, "verify-mode", string(verify.ModeNone), "commit signature verification: none; head (the branch head must be signed by a trusted key); strict (every commit since the last accepted one too)")
	f.StringVar(&v.trustRoot, "verify-trust-root", "", "strict mode: the full hash of a commit of the branch the operator vouches for; verification starts there when no anchor is recorded in the cluster yet (every later commit must be signed). Without it and without an anchor, strict mode refuses every head")
	f.StringVar(&v.keysDir, "verify-keys-dir", "", "directory of a mounted Secret holding the trusted OpenPGP and SSH public keys; re-read every cycle, so updating the Secret rotates keys without a restart")
}

// applyFluxVerify takes spec.verify of a --config GitRepository where the
// flags were not given: mode HEAD is head, secretRef.name names the keys
// directory under --git-credentials-root (as Flux reads keys from a Secret).
func (o *options) applyFluxVerify(f *pflag.FlagSet) error {
	fv := o.verify
	if fv == nil {
		return nil
	}
	if !strings.EqualFold(string(fv.Mode), string(sourcev1.ModeGitHEAD)) && fv.Mode != "" {
		return fmt.Errorf("%w: spec.verify.mode %q: only HEAD is supported (use --verify-mode strict for every commit)", ErrConfig, fv.Mode)
	}
	if !f.Changed("verify-mode") {
		o.verifyOpts.mode = string(verify.ModeHead)
	}
	if name := fv.SecretRef.Name; name != "" && !f.Changed("verify-keys-dir") {
		if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return fmt.Errorf("%w: spec.verify.secretRef.name %q: want a plain name", ErrConfig, name)
		}
		o.verifyOpts.keysDir = filepath.Join(o.credentialsRoot, name)
	}
	return nil
}

// verifyProblems checks the verification settings.
func (o *options) verifyProblems() []string {
	mode, err := verify.ParseMode(o.verifyOpts.mode)
	if err != nil {
		return []string{"--verify-mode: " + err.Error()}
	}
	if o.verifyOpts.trustRoot != "" && !truststate.ValidHash(o.verifyOpts.trustRoot) {
		return []string{fmt.Sprintf("--verify-trust-root %q: want a full, lower-case commit hash", o.verifyOpts.trustRoot)}
	}
	if mode == verify.ModeNone {
		return nil
	}
	if o.verifyOpts.keysDir == "" {
		return []string{fmt.Sprintf("--verify-mode %s needs --verify-keys-dir", mode)}
	}
	if fi, err := os.Stat(o.verifyOpts.keysDir); err != nil || !fi.IsDir() {
		return []string{fmt.Sprintf("--verify-keys-dir %s: not a directory", o.verifyOpts.keysDir)}
	}
	return nil
}

// newVerifier builds the loop's commit verifier; nil in mode none (the
// loop still refuses revisions of another branch). Strict mode's anchor
// is kept in the cluster (store), so it survives restarts and failover.
func newVerifier(o *options, src *gitrepo.Source, store *truststate.Store, m *metrics.Metrics) (reconcile.Verifier, error) {
	mode, err := verify.ParseMode(o.verifyOpts.mode)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if mode == verify.ModeNone {
		return nil, nil
	}
	cfg := verify.Config{
		Mode:      mode,
		KeysDir:   o.verifyOpts.keysDir,
		Commits:   src,
		Anchor:    store,
		TrustRoot: o.verifyOpts.trustRoot,
	}
	if m != nil {
		refused, err := m.CountVerificationFailures(verify.Reasons)
		if err != nil {
			return nil, err
		}
		cfg.OnRefused = refused
	}
	return verify.New(cfg)
}
