package bootstrap

import (
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-gitops/flotilla"
	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// InstallOptions describe one cluster's agent install.
type InstallOptions struct {
	// Cluster is the cluster's name in the fleet repo. Required.
	Cluster string
	// RepoURL is the fleet repo as the agent reaches it (https://, http://
	// or ssh://), without credentials. Required.
	RepoURL string
	// Branch the agent follows; DefaultBranch when empty.
	Branch string
	// Interval between reconciles; the base's (1m) when zero.
	Interval time.Duration
	// GitTransport is what the agent fetches: GitTransportAuto (the
	// cluster's slice ref once `flotilla publish` has cut it, the branch
	// until then), GitTransportSlice (the slice ref only) or
	// GitTransportBranch (the whole tree of Branch); the base's (auto)
	// when empty.
	GitTransport string
	// Namespace of the agent; DefaultNamespace when empty.
	Namespace string
	// CredentialsSecret names the Secret with the Git credentials. Empty or
	// DefaultCredentialsSecret keeps the base's empty template Secret (to
	// be filled in the cluster); another name points the DaemonSet at a
	// Secret you manage and leaves the template out.
	CredentialsSecret string
	// Image of the agent; DefaultImage() when empty.
	Image string
	// SOPSAgeKey is the cluster's private age identity (age-keygen's file
	// format). When set, the install includes it as the Secret
	// SOPSAgeSecret, from which the agent decrypts SOPS-encrypted files;
	// the manifests then hold a private key and must not be committed.
	SOPSAgeKey []byte
	// Base replaces the embedded manifests/base (tests).
	Base fs.FS
}

// withDefaults fills empty fields and checks them all.
func (o InstallOptions) withDefaults() (InstallOptions, error) {
	if o.Branch == "" {
		o.Branch = DefaultBranch
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.CredentialsSecret == "" {
		o.CredentialsSecret = DefaultCredentialsSecret
	}
	if o.Image == "" {
		o.Image = DefaultImage()
	}
	if o.Base == nil {
		base, err := fs.Sub(flotilla.Manifests(), BaseDir)
		if err != nil {
			return o, err
		}
		o.Base = base
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if errs := validation.IsDNS1123Label(o.Cluster); len(errs) > 0 {
		bad("cluster name %q: %s", o.Cluster, strings.Join(errs, "; "))
	}
	if err := checkRepoURL(o.RepoURL); err != nil {
		bad("repo URL: %v", err)
	}
	if !validBranch(o.Branch) {
		bad("branch %q is not a valid branch name", o.Branch)
	}
	if o.Interval < 0 {
		bad("interval must not be negative")
	}
	switch o.GitTransport {
	case "", GitTransportAuto, GitTransportBranch, GitTransportSlice:
	default:
		bad("git transport %q: want %s, %s or %s", o.GitTransport, GitTransportAuto, GitTransportBranch, GitTransportSlice)
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		bad("namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(o.CredentialsSecret); len(errs) > 0 {
		bad("credentials secret %q: %s", o.CredentialsSecret, strings.Join(errs, "; "))
	}
	if _, err := parseImage(o.Image); err != nil {
		bad("image %q: %v", o.Image, err)
	}
	if len(o.SOPSAgeKey) > 0 {
		if ids, err := sopsdecrypt.ParseIdentities(o.SOPSAgeKey); err != nil || len(ids) == 0 {
			bad("SOPS age key: not an age identity file")
		}
	}
	if len(problems) > 0 {
		return o, fmt.Errorf("%w: %s", ErrInvalidOption, strings.Join(problems, "; "))
	}
	return o, nil
}

// checkRepoURL accepts what the agent can fetch and refuses credentials in
// the URL: they would be stored in a ConfigMap, readable by anyone who can
// read ConfigMaps in the namespace. The error never repeats the URL.
func checkRepoURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL")
	}
	switch u.Scheme {
	case "https", "http", "ssh":
	default:
		return fmt.Errorf("scheme %q: want https://, http:// or ssh://", u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("no host")
	}
	// SSH URLs name a user (git@); a password there, or any user
	// information in an HTTP URL (a token as user name works on most
	// forges), is a credential.
	if _, hasPassword := u.User.Password(); hasPassword || (u.User != nil && u.Scheme != "ssh") {
		return fmt.Errorf("it holds credentials: put them in the credentials Secret, not in the URL")
	}
	return nil
}

// RepoURLFromRemote turns a Git remote as `git remote` shows it into a URL
// the agent accepts: scp-like [user@]host:path becomes ssh://[user@]host/path;
// anything else is returned as is.
func RepoURLFromRemote(remote string) string {
	if strings.Contains(remote, "://") {
		return remote
	}
	colon := strings.Index(remote, ":")
	if colon <= 0 || strings.Contains(remote[:colon], "/") {
		return remote // a local path
	}
	return "ssh://" + remote[:colon] + "/" + strings.TrimPrefix(remote[colon+1:], "/")
}

// validBranch is git check-ref-format's rules for a branch name, in short.
func validBranch(b string) bool {
	if b == "" || strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") ||
		strings.HasSuffix(b, ".") || strings.HasSuffix(b, ".lock") || strings.Contains(b, "..") ||
		strings.Contains(b, "//") || strings.Contains(b, "@{") || b == "@" {
		return false
	}
	for _, r := range b {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(`~^:?*[\`, r) {
			return false
		}
	}
	for _, part := range strings.Split(b, "/") {
		if strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

// imageRef is an image reference split the way a kustomize images entry
// wants it.
type imageRef struct{ name, tag, digest string }

func parseImage(s string) (imageRef, error) {
	if s == "" || strings.ContainsAny(s, " \t\n") {
		return imageRef{}, fmt.Errorf("not an image reference")
	}
	var r imageRef
	if i := strings.Index(s, "@"); i >= 0 {
		r.digest = s[i+1:]
		s = s[:i]
		if !strings.Contains(r.digest, ":") {
			return imageRef{}, fmt.Errorf("digest %q: want algorithm:hex", r.digest)
		}
	}
	if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		r.tag = s[i+1:]
		s = s[:i]
		if r.tag == "" {
			return imageRef{}, fmt.Errorf("empty tag")
		}
	}
	if s == "" || strings.HasSuffix(s, "/") {
		return imageRef{}, fmt.Errorf("no image name")
	}
	r.name = s
	if r.tag == "" && r.digest == "" {
		return imageRef{}, fmt.Errorf("no tag or digest: pin the image")
	}
	return r, nil
}

// Setting is one agent flag that an install sets. In the cluster it is the
// FLOTILLA_* variable Env() of the flotilla-agent-config ConfigMap; a local
// agent gets it as Arg().
type Setting struct {
	Flag  string // e.g. "cluster-name"
	Value string
}

// Env is the setting's environment variable, as the agent maps flags.
func (s Setting) Env() string {
	return "FLOTILLA_" + strings.ToUpper(strings.ReplaceAll(s.Flag, "-", "_"))
}

// Arg is the setting as a command-line flag.
func (s Setting) Arg() string { return "--" + s.Flag + "=" + s.Value }

// Settings are the agent settings of this install, in a fixed order.
func (o InstallOptions) Settings() ([]Setting, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return o.settings(), nil
}

func (o InstallOptions) settings() []Setting {
	s := []Setting{
		{Flag: "cluster-name", Value: o.Cluster},
		{Flag: "repo-url", Value: o.RepoURL},
		{Flag: "branch", Value: o.Branch},
	}
	if o.Interval > 0 {
		s = append(s, Setting{Flag: "interval", Value: shortDuration(o.Interval)})
	}
	if o.GitTransport != "" {
		s = append(s, Setting{Flag: "git-transport", Value: o.GitTransport})
	}
	return s
}

// shortDuration is d as people write it: 5m rather than 5m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// StatusRef is the ref the cluster's agent commits its status to.
func (o InstallOptions) StatusRef() string { return status.RefFor(o.Cluster) }

// LocalAgent is where an agent run as a local process (the demo, a laptop
// against a test cluster) keeps what the DaemonSet keeps in its volumes.
type LocalAgent struct {
	Kubeconfig     string
	CacheDir       string
	CredentialsDir string // empty: anonymous Git access
	MetricsAddr    string // empty: "0", off
	HealthAddr     string // empty: "0", off
	// Identity in the leader Lease; the DaemonSet uses the pod name.
	Identity string
}

// LocalAgentArgs are the flotilla-agent arguments that run this install's
// agent as a local process: the install's Settings and the DaemonSet's own
// arguments, with the pod's paths replaced by local ones.
func (o InstallOptions) LocalAgentArgs(l LocalAgent) ([]string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if l.Kubeconfig == "" || l.CacheDir == "" {
		return nil, fmt.Errorf("%w: a local agent needs a kubeconfig and a cache directory", ErrInvalidOption)
	}
	orOff := func(s string) string {
		if s == "" {
			return "0"
		}
		return s
	}
	args := []string{
		"--leader-elect",
		"--cache-dir=" + l.CacheDir,
		"--metrics-addr=" + orOff(l.MetricsAddr),
		"--health-addr=" + orOff(l.HealthAddr),
		"--kubeconfig=" + l.Kubeconfig,
		"--namespace=" + o.Namespace,
	}
	if l.CredentialsDir != "" {
		args = append(args, "--git-credentials-dir="+l.CredentialsDir)
	}
	if l.Identity != "" {
		args = append(args, "--identity="+l.Identity)
	}
	for _, s := range o.settings() {
		args = append(args, s.Arg())
	}
	return args, nil
}
