// Package ocitest pushes packaged charts to an OCI registry with Helm's
// own registry client, as `helm push` does, for tests of oci:// chart
// vendoring (test/ociregistry starts the registry). It is test support;
// it lives under pkg/render because only that tree imports Helm.
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
)

// pushTimeout bounds each request of a push.
const pushTimeout = time.Minute

// Registry is where and as whom to push.
type Registry struct {
	Host               string // host:port
	CAFile             string // PEM of the CA the registry's certificate is signed by
	Username, Password string
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
