package chartrepo

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"
)

// Proxy serves a chart repository under https://<host>/charts/ for a client
// configured with HTTPS_PROXY=Proxy.URL and SSL_CERT_FILE=<CAPEM written to
// a file>: it answers CONNECT itself and terminates TLS with a certificate
// for the host signed by its own CA. It lets a real `flotilla render`
// vendor charts whose app.yaml names an example https URL from loopback.
type Proxy struct {
	// URL is the proxy's address, http://127.0.0.1:<port>.
	URL string
	// CAPEM is the CA certificate clients must trust.
	CAPEM []byte

	repo *Server
	ln   net.Listener
	tls  *tls.Config
	wg   sync.WaitGroup
}

// ServeProxy starts a proxy serving charts as https://<host>/charts.
func ServeProxy(charts []*Chart, host string) (*Proxy, error) {
	repo, err := newServer(charts)
	if err != nil {
		return nil, err
	}
	repo.anyPrefix = true
	caPEM, cert, err := selfSignedFor(host)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("serve proxy: %w", err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), CAPEM: caPEM, repo: repo, ln: ln,
		tls: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Requests returns how many requests each repository path received.
func (p *Proxy) Requests() map[string]int { return p.repo.Requests() }

// Close stops the proxy.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(conn)
	}
}

// handle answers one client connection: a CONNECT tunnel that it
// terminates with TLS, or plain proxied HTTP requests.
func (p *Proxy) handle(conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute)) //nolint:errcheck // best effort
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		p.serveOne(conn, br, req)
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	tc := tls.Server(conn, p.tls)
	if err := tc.Handshake(); err != nil {
		return
	}
	tbr := bufio.NewReader(tc)
	for {
		req, err := http.ReadRequest(tbr)
		if err != nil {
			return
		}
		if !p.serveOne(tc, tbr, req) {
			return
		}
	}
}

// serveOne writes the response to one request; false when the connection
// must close.
func (p *Proxy) serveOne(conn net.Conn, _ *bufio.Reader, req *http.Request) bool {
	rec := &responseBuffer{header: http.Header{}}
	p.repo.serve(rec, req)
	resp := &http.Response{
		StatusCode: rec.status(), ProtoMajor: 1, ProtoMinor: 1, Header: rec.header,
		ContentLength: int64(len(rec.body)), Body: io.NopCloser(bytes.NewReader(rec.body)),
	}
	return resp.Write(conn) == nil
}

type responseBuffer struct {
	header http.Header
	code   int
	body   []byte
}

func (r *responseBuffer) Header() http.Header { return r.header }
func (r *responseBuffer) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *responseBuffer) Write(b []byte) (int, error) {
	r.body = append(r.body, b...)
	return len(b), nil
}
func (r *responseBuffer) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// selfSignedFor returns a CA certificate (PEM) and a leaf certificate for
// host signed by it.
func selfSignedFor(host string) ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flotilla test chart repository CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}, nil
}
