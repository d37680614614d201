package ocitest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"helm.sh/helm/v3/pkg/registry"

	"github.com/flotilla-gitops/flotilla/test/chartrepo"
	"github.com/flotilla-gitops/flotilla/test/ociregistry"
)

// pushTimeout bounds each request of a push.
const pushTimeout = time.Minute

// Registry is where and as whom to push.
type Registry struct {
	Host               string // host:port
	CAFile             string // PEM of the CA the registry's certificate is signed by
	Username, Password string
}

// As is the registry r, pushing as its one user.
func As(r *ociregistry.Registry) Registry {
	return Registry{Host: r.Host, CAFile: r.CAFile, Username: r.Username, Password: r.Password}
}

// PushDir packages the chart directory dir at each version (replacing its
// Chart.yaml version) and pushes it under repoPath; it returns the
// manifest digests by version.
func (r Registry) PushDir(repoPath, dir string, versions ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range versions {
		ch, err := chartrepo.Package(dir, v)
		if err != nil {
			return nil, err
		}
		if out[v], err = r.Push(repoPath, ch.Name, ch.Version, ch.Archive); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Push uploads the chart archive (a .tgz whose Chart.yaml names name and
// version) to oci://<host>/<repoPath>/<name>:<version> and returns the
// manifest digest.
func (r Registry) Push(repoPath, name, version string, archive []byte) (string, error) {
	pem, err := os.ReadFile(r.CAFile)
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return "", fmt.Errorf("%s holds no certificate", r.CAFile)
	}
	hc := &http.Client{Timeout: pushTimeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	c, err := registry.NewClient(
		registry.ClientOptHTTPClient(hc),
		registry.ClientOptWriter(io.Discard),
		registry.ClientOptBasicAuth(r.Username, r.Password),
		// No config file: the pusher's credentials are the ones above.
		registry.ClientOptCredentialsFile(os.DevNull),
	)
	if err != nil {
		return "", err
	}
	// Helm's convention: + is _ in a tag (Push converts the ref itself).
	res, err := c.Push(archive, fmt.Sprintf("%s/%s/%s:%s", r.Host, repoPath, name, version))
	if err != nil {
		return "", fmt.Errorf("push %s %s: %w", name, version, err)
	}
	return res.Manifest.Digest, nil
}
