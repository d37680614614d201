package chartvendor

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/flotilla-gitops/flotilla/pkg/render"
)

const (
	ociScheme = "oci"
	// maxListedTags bounds how many versions an error lists.
	maxListedTags = 10
	// maxRegistryResponse bounds every registry response body (tag lists,
	// manifests, the chart layer): Helm's client reads them into memory.
	maxRegistryResponse = maxChartArchive
)

// RegistryEnv is Helm's variable naming its registry config file.
const RegistryEnv = "HELM_REGISTRY_CONFIG"

// RegistryOptions say how oci:// charts are reached. Credentials are used
// only in memory: never written to the fleet repo, the lock file, errors
// or logs.
type RegistryOptions struct {
	// ConfigFile is a registry config in Docker's config.json format
	// (what `helm registry login` and `docker login` write). Empty means
	// $HELM_REGISTRY_CONFIG, else Helm's default; Docker's own config
	// ($DOCKER_CONFIG/config.json or ~/.docker/config.json) is the
	// fallback either way, as in Helm.
	ConfigFile string
	// Username and Password, when both are set, are used for every
	// registry instead of the config files.
	Username, Password string
	// CAFile is a PEM file of CA certificates trusted besides the
	// system's, for a registry with a private CA.
	CAFile string
}

// credentialSource names where credentials came from, for errors.
func (o RegistryOptions) credentialSource() string {
	switch {
	case o.Username != "" && o.Password != "":
		return "the credentials given for user " + o.Username
	case o.ConfigFile != "":
		return "the credentials in " + o.ConfigFile
	case os.Getenv(RegistryEnv) != "":
		return "the credentials in $" + RegistryEnv + " (" + os.Getenv(RegistryEnv) + ")"
	}
	return "the credentials in Helm's or Docker's registry config"
}

// RefError is a failure to vendor one ChartRef. Field is the ChartRef
// field at fault ("repo", "chart" or "version"), so the caller can point
// at the application field that named it.
type RefError struct {
	Ref   ChartRef
	Field string
	Err   error
}

func (e *RefError) Error() string { return e.Err.Error() }
func (e *RefError) Unwrap() error { return e.Err }

// fieldError says which ChartRef field an error is about when its class
// alone does not.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func fieldOf(err error) string {
	var fe *fieldError
	switch {
	case errors.As(err, &fe):
		return fe.field
	case errors.Is(err, render.ErrChartNotFound):
		return "version"
	}
	return "repo"
}

// ociClient makes Helm's registry client, with the transport that bounds
// it, on first use.
func (v *vendorer) ociClient() (*registry.Client, error) {
	if v.oci != nil {
		return v.oci, nil
	}
	o := v.registry
	base := http.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, render.Classify(render.ErrChartRepo, fmt.Sprintf("registry CA file: %v", err))
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, render.Classify(render.ErrChartRepo, fmt.Sprintf("registry CA file %s holds no PEM certificate", o.CAFile))
		}
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	// Helm's client calls with context.Background(): the transport gives
	// every request ours, and http.Client's timeout bounds each one.
	hc := &http.Client{Timeout: httpTimeout, Transport: &boundedTransport{ctx: v.ctx, base: base, limit: maxRegistryResponse}}
	opts := []registry.ClientOption{
		registry.ClientOptHTTPClient(hc),
		registry.ClientOptWriter(io.Discard),
		registry.ClientOptEnableCache(true),
	}
	cfg := o.ConfigFile
	if cfg == "" {
		cfg = os.Getenv(RegistryEnv)
	}
	if cfg != "" {
		opts = append(opts, registry.ClientOptCredentialsFile(cfg))
	}
	if o.Username != "" && o.Password != "" {
		opts = append(opts, registry.ClientOptBasicAuth(o.Username, o.Password))
	}
	c, err := registry.NewClient(opts...)
	if err != nil {
		// Its messages name the file and the format problem, not secrets.
		return nil, render.Classify(render.ErrChartRepo, fmt.Sprintf("registry config: %v", err))
	}
	v.oci = c
	return c, nil
}

// vendorOCI resolves ref (repo oci://host/path) to the highest tag of
// host/path/<chart> that satisfies c, pulls it and unpacks it.
func (v *vendorer) vendorOCI(ref ChartRef, u *url.URL, c *semver.Constraints) (lockEntry, error) {
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return lockEntry{}, render.Classify(render.ErrChartRepo, "an oci:// repository is host/path only (no credentials, query or fragment)")
	}
	client, err := v.ociClient()
	if err != nil {
		return lockEntry{}, err
	}
	name := u.Host + strings.TrimSuffix(u.Path, "/") + "/" + ref.Chart
	tags, err := client.Tags(name)
	if err != nil {
		return lockEntry{}, v.registryError(ref, "list the tags of "+ociScheme+"://"+name, err)
	}
	version, err := pickTag(tags, c)
	if err != nil {
		return lockEntry{}, render.Classify(render.ErrChartNotFound, fmt.Sprintf("%s://%s: %v", ociScheme, name, err))
	}
	// Helm's convention: + is _ in a tag.
	res, err := client.Pull(name + ":" + strings.ReplaceAll(version, "+", "_"))
	if err != nil {
		return lockEntry{}, v.registryError(ref, "pull "+ociScheme+"://"+name+":"+version, err)
	}
	sum := sha256.Sum256(res.Chart.Data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if digest != res.Chart.Digest {
		return lockEntry{}, render.Classify(render.ErrChartDigest, fmt.Sprintf("%s://%s:%s: the manifest says %s, the chart layer is %s", ociScheme, name, version, res.Chart.Digest, digest))
	}
	e := lockEntry{
		Repo:           ref.Repo,
		Chart:          ref.Chart,
		Version:        ref.Version,
		Resolved:       version,
		Digest:         digest,
		ManifestDigest: res.Manifest.Digest,
		Path:           path.Join(ChartsDir, ref.Chart, version),
	}
	if err := v.unpack(e, res.Chart.Data); err != nil {
		return lockEntry{}, err
	}
	return e, nil
}

// pickTag returns the highest version among tags (semver, as Helm's Tags
// returns them, + restored) that satisfies c; failing, it lists the
// newest versions there are.
func pickTag(tags []string, c *semver.Constraints) (string, error) {
	var best *semver.Version
	var all []*semver.Version
	for _, t := range tags {
		ver, err := semver.NewVersion(t)
		if err != nil {
			continue
		}
		all = append(all, ver)
		if c.Check(ver) && (best == nil || ver.GreaterThan(best)) {
			best = ver
		}
	}
	if best != nil {
		return best.Original(), nil
	}
	if len(all) == 0 {
		return "", errors.New("the repository has no chart versions (no semver tags)")
	}
	slices.SortFunc(all, func(a, b *semver.Version) int { return b.Compare(a) })
	listed := make([]string, 0, maxListedTags)
	for _, ver := range all[:min(len(all), maxListedTags)] {
		listed = append(listed, ver.Original())
	}
	more := ""
	if len(all) > maxListedTags {
		more = fmt.Sprintf(" and %d older", len(all)-maxListedTags)
	}
	return "", fmt.Errorf("no version matches %q; it has %s%s", c.String(), strings.Join(listed, ", "), more)
}

// registryError classifies an error of Helm's registry client: refused
// credentials, a missing repository, a certificate the client does not
// trust, a response over the size limit, or another failure. Its detail
// never carries credentials (the client's errors hold the method, the URL
// without user info and the registry's error codes).
func (v *vendorer) registryError(ref ChartRef, what string, err error) error {
	host := strings.TrimPrefix(ref.Repo, ociScheme+"://")
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	var resp *errcode.ErrorResponse
	var unknownCA x509.UnknownAuthorityError
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return render.ClassifyCause(render.ErrChartRepo, fmt.Sprintf("%s: %v", what, err), err)
	case errors.Is(err, errResponseTooLarge):
		return render.Classify(render.ErrTooLarge, fmt.Sprintf("%s: a registry response is over %d bytes", what, maxRegistryResponse))
	case errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
		return render.Classify(render.ErrChartAuth, fmt.Sprintf("%s: registry %s answered %d %s to %s",
			what, host, resp.StatusCode, http.StatusText(resp.StatusCode), v.registry.credentialSource()))
	case errors.Is(err, auth.ErrBasicCredentialNotFound):
		return render.Classify(render.ErrChartAuth, fmt.Sprintf("%s: registry %s requires a login and there is none for it in %s",
			what, host, v.registry.credentialSource()))
	case errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound:
		return &fieldError{field: "chart", err: render.Classify(render.ErrChartNotFound,
			fmt.Sprintf("%s: registry %s has no chart %s under %s", what, host, ref.Chart, ref.Repo))}
	case errors.As(err, &unknownCA):
		return render.Classify(render.ErrChartRepo, fmt.Sprintf("%s: the registry's certificate is signed by an unknown authority (trust its CA with --registry-ca-file)", what))
	}
	return render.ClassifyCause(render.ErrChartRepo, fmt.Sprintf("%s: %v", what, err), err)
}

var errResponseTooLarge = errors.New("registry response too large")

// boundedTransport cancels each request with the vendoring context too
// (besides the request's own, which carries http.Client's timeout) and
// cuts response bodies at limit bytes.
type boundedTransport struct {
	ctx   context.Context
	base  http.RoundTripper
	limit int64
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.ctx, cancel)
	release := func() { stop(); cancel() }
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.limit, release: release}
	return resp, nil
}

type limitedBody struct {
	rc      io.ReadCloser
	left    int64
	release func()
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errResponseTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error {
	err := b.rc.Close()
	b.release()
	return err
}
