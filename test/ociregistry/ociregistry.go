package ociregistry

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// startTimeout bounds how long the registry may take to answer.
const startTimeout = time.Minute

// Registry is a running registry.
type Registry struct {
	// Host is 127.0.0.1:<port>; charts are at oci://<Host>/<path>.
	Host string
	// CAFile is the PEM file of the CA that signed the registry's
	// certificate.
	CAFile string
	// Username and Password are the one account htpasswd holds.
	Username, Password string

	dir string
	cmd *exec.Cmd
	log bytes.Buffer
}

// Path is bin/registry, or an error wrapping testenv.ErrToolMissing.
func Path() (string, error) {
	dir, err := testenv.BinDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "registry")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s (build it with `tools/build.sh bin registry`): %w", p, testenv.ErrToolMissing)
	}
	return p, nil
}

// Start starts a registry for the test and stops it when the test ends.
// It also points the test's Helm and Docker registry config lookups
// ($DOCKER_CONFIG, $HELM_CONFIG_HOME, $HELM_REGISTRY_CONFIG) at empty
// places, so the developer's own credentials never take part.
func Start(t testing.TB) *Registry {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	t.Setenv("HELM_CONFIG_HOME", t.TempDir())
	t.Setenv("HELM_REGISTRY_CONFIG", "")
	bin, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{dir: t.TempDir(), Username: "pusher", Password: "pusher-" + rand.Text()[:12]}
	t.Cleanup(r.Stop)
	// The port is picked by a listener closed just before the registry
	// binds it; another process may take it meanwhile, hence the retries.
	for attempt := 0; ; attempt++ {
		err = r.start(bin)
		if err == nil {
			return r
		}
		r.Stop()
		if attempt == 2 {
			t.Fatalf("start registry: %v\n%s", err, r.log.String())
		}
	}
}

func (r *Registry) start(bin string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r.Host = ln.Addr().String()
	ln.Close()
	certFile, keyFile, err := r.writePKI()
	if err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
	if err != nil {
		return err
	}
	htpasswd := filepath.Join(r.dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(r.Username+":"+string(hash)+"\n"), 0o600); err != nil {
		return err
	}
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
auth:
  htpasswd:
    realm: flotilla-test
    path: %s
`, filepath.Join(r.dir, "storage"), r.Host, certFile, keyFile, htpasswd)
	configFile := filepath.Join(r.dir, "config.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		return err
	}
	r.log.Reset()
	r.cmd = exec.Command(bin, "serve", configFile)
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	// Its environment would otherwise configure it (REGISTRY_*) or send
	// it through a proxy.
	r.cmd.Env = []string{"HOME=" + r.dir, "PATH=" + os.Getenv("PATH")}
	if err := r.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- r.cmd.Wait() }()
	return r.waitReady(exited)
}

// waitReady polls /v2/ until it answers 401 (up, auth required).
func (r *Registry) waitReady(exited <-chan error) error {
	c := r.httpClient()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.Host+"/v2/", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
			return fmt.Errorf("GET /v2/ without credentials: %s, want 401", resp.Status)
		}
		select {
		case err := <-exited:
			return fmt.Errorf("registry exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("registry not ready after %s: %v", startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *Registry) httpClient() *http.Client {
	pool := x509.NewCertPool()
	if pemBytes, err := os.ReadFile(r.CAFile); err == nil {
		pool.AppendCertsFromPEM(pemBytes)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Proxy:           nil,
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
}

// Stop stops the registry (a test that shows it is no longer needed);
// the test's end stops it too.
func (r *Registry) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_, _ = r.cmd.Process.Wait()
	r.cmd = nil
}

// Log is what the registry printed.
func (r *Registry) Log() string { return r.log.String() }

// ConfigFile writes a registry config in Docker's config.json format
// (what `helm registry login` writes) holding username and password for
// the registry, into dir, and returns its path.
func (r *Registry) ConfigFile(dir, username, password string) (string, error) {
	auth := base64.StdEncoding.EncodeToString([]byte(username + ":" + password))
	data, err := json.Marshal(map[string]any{"auths": map[string]any{r.Host: map[string]string{"auth": auth}}})
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "registry-config.json")
	return p, os.WriteFile(p, data, 0o600)
}

// writePKI writes a CA and a serving certificate for 127.0.0.1 signed by
// it; ECDSA P-256, which generates in microseconds.
func (r *Registry) writePKI() (certFile, keyFile string, err error) {
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flotilla-test-registry-ca"},
		NotBefore: now, NotAfter: now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now, NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	r.CAFile = filepath.Join(r.dir, "ca.crt")
	certFile = filepath.Join(r.dir, "registry.crt")
	keyFile = filepath.Join(r.dir, "registry.key")
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{r.CAFile, "CERTIFICATE", caDER}, {certFile, "CERTIFICATE", der}, {keyFile, "EC PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			return "", "", fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return certFile, keyFile, nil
}
