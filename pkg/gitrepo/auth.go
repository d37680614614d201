package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/flotilla-gitops/flotilla/pkg/redact"
)

// Auth holds the credentials for a remote. The zero value is anonymous.
// Its String method never prints secret material.
type Auth struct {
	// Username and Password: HTTPS basic auth (a token as password works
	// for most forges; Username defaults to "git" then). With SSHKey set,
	// Password is the key's passphrase instead, as in Flux.
	Username string
	Password string
	// BearerToken: HTTPS "Authorization: Bearer".
	BearerToken string
	// SSHKey is a PEM or OpenSSH private key; KnownHosts (known_hosts
	// format) is then required to check the server's host key.
	SSHKey     []byte
	KnownHosts []byte
	// CABundle adds PEM CAs to the system pool for HTTPS.
	CABundle []byte
}

// Secret file names read by LoadAuth, the keys of a Flux Git secret.
const (
	SecretUsername    = "username"
	SecretPassword    = "password"
	SecretBearerToken = "bearerToken"
	SecretIdentity    = "identity"
	SecretKnownHosts  = "known_hosts"
	SecretCA          = "ca.crt"
)

// LoadAuth reads credentials from a directory holding a mounted Secret
// (files username, password, bearerToken, identity, known_hosts, ca.crt or
// caFile; all optional). Missing files are skipped; a missing directory is
// an error.
func LoadAuth(dir string) (Auth, error) {
	if _, err := os.Stat(dir); err != nil {
		return Auth{}, fmt.Errorf("load git credentials: %w", err)
	}
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("load git credentials: %s: %w", name, err)
		}
		return b, nil
	}
	var a Auth
	var err error
	var b []byte
	if b, err = read(SecretUsername); err != nil {
		return Auth{}, err
	}
	a.Username = strings.TrimSpace(string(b))
	if b, err = read(SecretPassword); err != nil {
		return Auth{}, err
	}
	a.Password = strings.TrimRight(string(b), "\r\n")
	if b, err = read(SecretBearerToken); err != nil {
		return Auth{}, err
	}
	a.BearerToken = strings.TrimSpace(string(b))
	if a.SSHKey, err = read(SecretIdentity); err != nil {
		return Auth{}, err
	}
	if a.KnownHosts, err = read(SecretKnownHosts); err != nil {
		return Auth{}, err
	}
	if a.CABundle, err = read(SecretCA); err != nil {
		return Auth{}, err
	}
	if a.CABundle == nil {
		if a.CABundle, err = read("caFile"); err != nil {
			return Auth{}, err
		}
	}
	return a, nil
}

// String describes the kind of credentials without revealing them.
func (a Auth) String() string {
	var kinds []string
	if len(a.SSHKey) > 0 {
		kinds = append(kinds, "ssh-key")
	} else {
		if a.BearerToken != "" {
			kinds = append(kinds, "bearer-token")
		}
		if a.Password != "" {
			kinds = append(kinds, "basic("+a.Username+")")
		}
	}
	if len(a.CABundle) > 0 {
		kinds = append(kinds, "ca-bundle")
	}
	if len(kinds) == 0 {
		return "anonymous"
	}
	return strings.Join(kinds, "+")
}

// GoString keeps %#v from printing secrets too.
func (a Auth) GoString() string { return "gitrepo.Auth{" + a.String() + "}" }

// endpoint is a remote ready for go-git: its URL without credentials, the
// transport auth and the CA bundle.
type endpoint struct {
	url      string // for go-git, no userinfo for HTTP(S)
	redacted string // for messages
	auth     transport.AuthMethod
	caBundle []byte
}

// endpoint prepares a remote. Credentials embedded in an HTTP(S) URL are
// moved out of it (and used when a has none), so they never reach messages.
func (a Auth) endpoint(raw string, timeout time.Duration) (*endpoint, error) {
	if raw == "" {
		return nil, errors.New("empty remote URL")
	}
	ep := &endpoint{url: raw, redacted: redact.URL(raw), caBundle: a.CABundle}
	u, perr := url.Parse(raw)
	isHTTP := perr == nil && (u.Scheme == "http" || u.Scheme == "https")
	if isHTTP && u.User != nil {
		if a.Password == "" && a.BearerToken == "" {
			a.Username = u.User.Username()
			a.Password, _ = u.User.Password()
		}
		u.User = nil
		ep.url = u.String()
	}
	switch {
	case len(a.SSHKey) > 0:
		if isHTTP {
			return nil, fmt.Errorf("remote %s: an SSH key needs an ssh:// or scp-like URL", ep.redacted)
		}
		auth, err := newSSHAuth(ep.url, a, timeout)
		if err != nil {
			return nil, err
		}
		ep.auth = auth
	case a.BearerToken != "":
		ep.auth = &githttp.TokenAuth{Token: a.BearerToken}
	case a.Password != "":
		user := a.Username
		if user == "" {
			user = "git"
		}
		ep.auth = &githttp.BasicAuth{Username: user, Password: a.Password}
	}
	return ep, nil
}

// sshAuth is go-git's public-key auth with a host key check against the
// given known_hosts only, a dial timeout, and a classified auth failure.
type sshAuth struct {
	*gitssh.PublicKeys
	hostKeyAlgorithms []string
	timeout           time.Duration
}

func newSSHAuth(remote string, a Auth, timeout time.Duration) (*sshAuth, error) {
	if len(a.KnownHosts) == 0 {
		return nil, errors.New("ssh key given without known_hosts")
	}
	ep, err := transport.NewEndpoint(remote)
	if err != nil {
		return nil, fmt.Errorf("parse remote: %w", err)
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	keys, err := gitssh.NewPublicKeys(user, a.SSHKey, a.Password)
	if err != nil {
		// The parse error names no key material.
		return nil, fmt.Errorf("ssh identity: %w", err)
	}
	db, err := knownHostsDB(a.KnownHosts)
	if err != nil {
		return nil, err
	}
	port := ep.Port
	if port == 0 {
		port = 22
	}
	hostPort := net.JoinHostPort(ep.Host, fmt.Sprint(port))
	check := db.HostKeyCallback()
	keys.HostKeyCallback = func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		if err := check(hostname, remote, key); err != nil {
			return fmt.Errorf("%w: host key of %s: %w", ErrAuth, hostname, err)
		}
		return nil
	}
	return &sshAuth{PublicKeys: keys, hostKeyAlgorithms: db.HostKeyAlgorithms(hostPort), timeout: timeout}, nil
}

func (a *sshAuth) ClientConfig() (*ssh.ClientConfig, error) {
	cfg, err := a.PublicKeys.ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = a.timeout
	if len(a.hostKeyAlgorithms) > 0 {
		cfg.HostKeyAlgorithms = a.hostKeyAlgorithms
	}
	// x/crypto/ssh reports a refused key as an untyped error; stop the
	// handshake ourselves once the key was tried, with a classified one.
	cfg.AuthCallback = func(c *ssh.ClientAuthContext) (ssh.AuthMethod, error) {
		if slices.Contains(c.TriedMethods, "publickey") {
			return nil, fmt.Errorf("%w: ssh public key refused", ErrAuth)
		}
		return nil, nil
	}
	return cfg, nil
}

// hostKeyDB is the part of go-git's known_hosts database used here.
type hostKeyDB interface {
	HostKeyCallback() ssh.HostKeyCallback
	HostKeyAlgorithms(hostWithPort string) []string
}

// knownHostsDB parses known_hosts content. The parser only reads files, so
// the content goes through a private temporary file that is removed at once.
func knownHostsDB(content []byte) (hostKeyDB, error) {
	f, err := os.CreateTemp("", "flotilla-known-hosts-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(content); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	db, err := gitssh.NewKnownHostsDb(f.Name())
	if err != nil {
		return nil, fmt.Errorf("parse known_hosts: %w", err)
	}
	return db, nil
}
