package bootstrap

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-gitops/flotilla"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/pkg/version"
)

// Defaults of the install, as manifests/base has them.
const (
	DefaultBranch            = "main"
	DefaultNamespace         = "flotilla-system"
	DefaultCredentialsSecret = "flotilla-git-credentials"
	// SOPSAgeSecret and SOPSAgeSecretKey hold the cluster's age identity
	// (the agent's --sops-age-secret default; the key Flux uses).
	SOPSAgeSecret    = "flotilla-sops-age"
	SOPSAgeSecretKey = "age.agekey"
	// ImageRepository is the agent image's name in manifests/base.
	ImageRepository = "ghcr.io/flotilla-gitops/flotilla-agent"
	// ManifestsImageTag is the tag manifests/base and the chart's
	// appVersion pin.
	ManifestsImageTag = "v0.1.0"
	// ConfigMapName holds the agent's settings as FLOTILLA_* variables.
	ConfigMapName = "flotilla-agent-config"
	// StatusRefAnnotation on the ConfigMap records where the agent commits
	// its status (the agent derives it from the cluster name).
	StatusRefAnnotation = "flotilla.dev/status-ref"
	// BaseDir is where a kustomize-dir install keeps its copy of the base.
	BaseDir = "base"
	// GitTransportAuto, GitTransportBranch and GitTransportSlice are the
	// values of the agent's --git-transport.
	GitTransportAuto   = "auto"
	GitTransportBranch = "branch"
	GitTransportSlice  = "slice"
)

// Paths inside the agent's pod, fixed by the DaemonSet of manifests/base.
const (
	PodCacheDir       = "/var/cache/flotilla"
	PodCredentialsDir = "/etc/flotilla/git-credentials"
	PodMetricsAddr    = ":8080"
	PodHealthAddr     = ":9440"
)

// DefaultImage is the agent image an install uses unless told otherwise: a
// released flotilla installs the agent of its own version; a development
// build the one the manifests pin.
func DefaultImage() string {
	if releaseVersion.MatchString(version.Version) {
		return ImageRepository + ":" + version.Version
	}
	return ImageRepository + ":" + ManifestsImageTag
}

var releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$`)

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

// InstallFiles are the files of a self-contained Kustomize directory that
// installs the cluster's agent: BaseDir/… (a copy of manifests/base) and,
// beside it, the generated overlay: kustomization.yaml and its patches.
// Keys are slash-separated relative paths.
func InstallFiles(opts InstallOptions) (map[string][]byte, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	err = fs.WalkDir(o.Base, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := fs.ReadFile(o.Base, p)
		if err != nil {
			return err
		}
		files[path.Join(BaseDir, p)] = data
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the manifests base: %w", err)
	}
	overlay, err := o.overlay()
	if err != nil {
		return nil, err
	}
	for name, data := range overlay {
		files[name] = data
	}
	return files, nil
}

const overlayHeader = `# Generated by flotilla bootstrap for cluster %s. Re-run it to change these
# values, or edit them here. %s/ is a copy of the Flotilla manifests/base.
#
#   kubectl apply --server-side -k .
`

// overlay generates the overlay's files.
func (o InstallOptions) overlay() (map[string][]byte, error) {
	img, err := parseImage(o.Image)
	if err != nil {
		return nil, err
	}
	imageEntry := map[string]string{"name": ImageRepository}
	if img.name != ImageRepository {
		imageEntry["newName"] = img.name
	}
	if img.tag != "" {
		imageEntry["newTag"] = img.tag
	}
	if img.digest != "" {
		imageEntry["digest"] = img.digest
	}
	type target struct {
		Kind string `yaml:"kind"`
		Name string `yaml:"name"`
	}
	type patch struct {
		Path   string  `yaml:"path,omitempty"`
		Patch  string  `yaml:"patch,omitempty"`
		Target *target `yaml:"target,omitempty"`
	}
	type kustomization struct {
		APIVersion string              `yaml:"apiVersion"`
		Kind       string              `yaml:"kind"`
		Namespace  string              `yaml:"namespace"`
		Resources  []string            `yaml:"resources"`
		Images     []map[string]string `yaml:"images"`
		Patches    []patch             `yaml:"patches"`
	}
	k := kustomization{
		APIVersion: "kustomize.config.k8s.io/v1beta1",
		Kind:       "Kustomization",
		Namespace:  o.Namespace,
		Resources:  []string{BaseDir},
		Images:     []map[string]string{imageEntry},
		Patches:    []patch{{Path: "agent-config.yaml", Target: &target{Kind: "ConfigMap", Name: ConfigMapName}}},
	}
	files := map[string][]byte{}

	data := map[string]string{}
	for _, s := range o.settings() {
		data[s.Env()] = s.Value
	}
	cm := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":        ConfigMapName,
			"annotations": map[string]string{StatusRefAnnotation: o.StatusRef()},
		},
		"data": data,
	}
	if files["agent-config.yaml"], err = marshalWithHeader(cm,
		"The cluster's agent settings, merged into the base's "+ConfigMapName+".\n"+
			"The agent commits its status to "+o.StatusRef()+"."); err != nil {
		return nil, err
	}

	if o.CredentialsSecret != DefaultCredentialsSecret {
		// Your own Secret: point the DaemonSet at it and leave the empty
		// template out, so nothing here ever competes with its manager.
		ds := map[string]any{
			"apiVersion": "apps/v1",
			"kind":       "DaemonSet",
			"metadata":   map[string]any{"name": "flotilla-agent"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"volumes": []any{map[string]any{"name": "git-credentials", "secret": map[string]any{"secretName": o.CredentialsSecret}}},
			}}},
		}
		if files["git-credentials.yaml"], err = marshalWithHeader(ds,
			"Git credentials come from the Secret "+o.CredentialsSecret+", which you create in "+o.Namespace+"."); err != nil {
			return nil, err
		}
		k.Patches = append(k.Patches,
			patch{Path: "git-credentials.yaml", Target: &target{Kind: "DaemonSet", Name: "flotilla-agent"}},
			patch{Patch: "$patch: delete\napiVersion: v1\nkind: Secret\nmetadata:\n  name: " + DefaultCredentialsSecret + "\n"},
		)
	}
	if len(o.SOPSAgeKey) > 0 {
		secret := map[string]any{
			"apiVersion": "v1",
			"kind":       "Secret",
			"metadata":   map[string]any{"name": SOPSAgeSecret},
			"type":       "Opaque",
			"stringData": map[string]string{SOPSAgeSecretKey: string(o.SOPSAgeKey)},
		}
		if files["sops-age.yaml"], err = marshalWithHeader(secret,
			"The cluster's private age key: its agent decrypts the SOPS files encrypted\n"+
				"for its recipient (spec.sops.ageRecipient). Apply it; never commit it."); err != nil {
			return nil, err
		}
		k.Resources = append(k.Resources, "sops-age.yaml")
	}
	kdata, err := marshalWithHeader(k, "")
	if err != nil {
		return nil, err
	}
	files["kustomization.yaml"] = append([]byte(fmt.Sprintf(overlayHeader, o.Cluster, BaseDir)), kdata...)
	return files, nil
}

func marshalWithHeader(v any, comment string) ([]byte, error) {
	var b bytes.Buffer
	for _, line := range strings.Split(comment, "\n") {
		if line != "" {
			b.WriteString("# " + line + "\n")
		}
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteInstallDir writes InstallFiles into dir. A directory that holds
// anything is refused with ErrNotEmpty unless force; with force, files of
// the same name are replaced and others left alone. It returns the
// written paths, sorted.
func WriteInstallDir(ctx context.Context, dir string, opts InstallOptions, force bool) ([]string, error) {
	files, err := InstallFiles(opts)
	if err != nil {
		return nil, err
	}
	if err := checkEmpty(dir, force); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := writeFileAtomic(filepath.Join(dir, filepath.FromSlash(name)), files[name]); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return names, nil
}

// InstallObjects builds the install (InstallFiles) with pkg/render, the
// agent's own renderer, and returns the objects in apply order.
func InstallObjects(ctx context.Context, opts InstallOptions) ([]*unstructured.Unstructured, error) {
	res, err := renderInstall(ctx, opts)
	if err != nil {
		return nil, err
	}
	return res.Objects, nil
}

// InstallYAML is InstallObjects as one YAML stream, ready for
// `kubectl apply --server-side -f -`.
func InstallYAML(ctx context.Context, opts InstallOptions) ([]byte, error) {
	res, err := renderInstall(ctx, opts)
	if err != nil {
		return nil, err
	}
	y, err := res.YAML()
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("# flotilla-agent for cluster %s, generated by flotilla bootstrap.\n"+
		"# Apply with: kubectl apply --server-side -f <this file>\n---\n", opts.Cluster)
	return append([]byte(head), y...), nil
}

func renderInstall(ctx context.Context, opts InstallOptions) (*render.Result, error) {
	files, err := InstallFiles(opts)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "flotilla-install-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for name, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return nil, err
		}
	}
	res, err := render.Unit(ctx, dir, slice.Unit{Name: "flotilla-agent", Kind: slice.UnitKustomize, Path: "."}, render.Options{})
	if err != nil {
		return nil, fmt.Errorf("build the install manifests: %w", err)
	}
	return res, nil
}
