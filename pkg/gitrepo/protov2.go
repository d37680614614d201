package gitrepo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage"

	"github.com/flotilla-gitops/flotilla/pkg/version"
)

// Git protocol v2 over smart HTTP (gitprotocol-v2(5)), for the agent's poll
// and fetch: a v0 ls-remote or fetch downloads the advertisement of every
// ref of the repository (about 86 bytes a ref, status refs included), v2's
// ls-refs names the refs wanted by prefix and its fetch names the commit
// wanted, so neither grows with the fleet. go-git v5 speaks v0 only; this
// file speaks the two commands with its pkt-line and packfile plumbing.

// errNoV2 says the server answered without protocol v2 (an old forge, or a
// proxy dropping the Git-Protocol header): the caller falls back to v0.
var errNoV2 = errors.New("server does not speak git protocol v2")

// Protocol choices for Source.Protocol.
const (
	// ProtocolAuto uses v2 when the server speaks it (HTTP(S) only), v0
	// otherwise.
	ProtocolAuto = ""
	// ProtocolV2 is v2, failing when the server does not speak it.
	ProtocolV2 = "v2"
	// ProtocolV0 is go-git's v0/v1 transport (full ref advertisement).
	ProtocolV0 = "v0"
)

// ValidProtocol checks a Source.Protocol value.
func ValidProtocol(p string) error {
	switch p {
	case ProtocolAuto, "auto", ProtocolV2, ProtocolV0:
		return nil
	}
	return fmt.Errorf("git protocol %q: want auto, v2 or v0", p)
}

// v2Client talks protocol v2 to one HTTP(S) remote.
type v2Client struct {
	ep      *endpoint
	base    string // the URL without a trailing slash
	http    *http.Client
	timeout time.Duration
}

// newV2Client returns nil for a remote that is not HTTP(S) (SSH stays v0).
func newV2Client(ep *endpoint, timeout time.Duration) (*v2Client, error) {
	u, err := url.Parse(ep.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if len(ep.caBundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(ep.caBundle) {
			return nil, fmt.Errorf("remote %s: the CA bundle holds no PEM certificate", ep.redacted)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &v2Client{
		ep:      ep,
		base:    strings.TrimSuffix(ep.url, "/"),
		http:    &http.Client{Transport: tr},
		timeout: timeoutOr(timeout),
	}, nil
}

// command POSTs one v2 command and returns the response body, which the
// caller closes. args are the command's arguments, one pkt-line each.
func (c *v2Client) command(ctx context.Context, cmd string, args []string) (io.ReadCloser, error) {
	var body bytes.Buffer
	enc := pktline.NewEncoder(&body)
	if err := enc.Encodef("command=%s\n", cmd); err != nil {
		return nil, err
	}
	if err := enc.Encodef("agent=flotilla/%s\n", version.Version); err != nil {
		return nil, err
	}
	body.WriteString("0001") // delim-pkt: capabilities end, arguments start
	for _, a := range args {
		if err := enc.Encodef("%s\n", a); err != nil {
			return nil, err
		}
	}
	if err := enc.Flush(); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/git-upload-pack", &body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	req.Header.Set("Accept", "application/x-git-upload-pack-result")
	return c.do(req)
}

// do sends a request with the v2 header and credentials; a status other
// than 200 is classified.
func (c *v2Client) do(req *http.Request) (io.ReadCloser, error) {
	req.Header.Set("Git-Protocol", "version=2")
	req.Header.Set("User-Agent", "flotilla/"+version.Version)
	if a, ok := c.ep.auth.(githttp.AuthMethod); ok && a != nil {
		a.SetAuth(req)
	}
	res, err := c.http.Do(req)
	if err != nil {
		// Refused, reset, or closed with EOF by a server going down is an
		// outage; a certificate problem is not. A caller's ended context
		// is told apart by classifyV2.
		if isUnreachable(err) {
			return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
		return nil, err
	}
	if res.StatusCode == http.StatusOK {
		return networkBody{res.Body}, nil
	}
	res.Body.Close()
	switch code := res.StatusCode; {
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		return nil, fmt.Errorf("%w: HTTP %d", ErrAuth, code)
	case code == http.StatusNotFound:
		return nil, fmt.Errorf("%w: HTTP %d", ErrRepoNotFound, code)
	case code >= 500:
		return nil, fmt.Errorf("%w: HTTP %d", ErrUnreachable, code)
	default:
		return nil, fmt.Errorf("git-upload-pack: HTTP %d", code)
	}
}

// networkBody marks a response cut short as an outage: its read errors
// come from the connection, unlike the EOFs of a truncated file in the
// cache, which classify must not call unreachable.
type networkBody struct{ io.ReadCloser }

func (b networkBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return n, err
}

// probe asks for the capability advertisement in v2 (what the git CLI
// does before its first command) and reports whether the server speaks
// it. A v0 server answers with its full ref advertisement instead, of
// which only the first packets are read.
func (c *v2Client) probe(ctx context.Context) (bool, error) {
	opCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(opCtx, http.MethodGet, c.base+"/info/refs?service=git-upload-pack", nil)
	if err != nil {
		return false, err
	}
	body, err := c.do(req)
	if err != nil {
		return false, classifyV2(ctx, "ls-refs", c.ep.redacted, err)
	}
	defer body.Close()
	r := newPktReader(body)
	for i := 0; i < 3; i++ {
		kind, line, err := r.next()
		if err != nil {
			if errors.Is(err, errNoV2) {
				return false, nil
			}
			return false, classify(ctx, "ls-refs", c.ep.redacted, err)
		}
		if kind != pktData {
			continue
		}
		text := string(line)
		if strings.HasPrefix(text, "# service=") {
			continue
		}
		return text == "version 2\n", nil
	}
	return false, nil
}

// lsRefs lists the refs named by the given full names (ref-prefix
// filtering: the server sends only refs starting with one of them; those
// merely sharing the prefix are dropped here). A reply that is not v2 is
// errNoV2.
func (c *v2Client) lsRefs(ctx context.Context, names ...string) (map[string]plumbing.Hash, error) {
	opCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	args := make([]string, 0, len(names))
	want := map[string]bool{}
	for _, n := range names {
		args = append(args, "ref-prefix "+n)
		want[n] = true
	}
	out, err := c.lsRefsArgs(opCtx, args)
	if err != nil {
		return nil, classifyV2(ctx, "ls-refs", c.ep.redacted, err)
	}
	for n := range out {
		if !want[n] {
			delete(out, n)
		}
	}
	return out, nil
}

func (c *v2Client) lsRefsArgs(ctx context.Context, args []string) (map[string]plumbing.Hash, error) {
	body, err := c.command(ctx, "ls-refs", args)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	r := newPktReader(body)
	out := map[string]plumbing.Hash{}
	for {
		kind, line, err := r.next()
		if err != nil {
			return nil, err
		}
		if kind == pktFlush {
			return out, nil
		}
		if kind != pktData {
			return nil, fmt.Errorf("%w: unexpected packet in ls-refs reply", errNoV2)
		}
		if bytes.HasPrefix(line, []byte("ERR ")) {
			return nil, fmt.Errorf("ls-refs: %s", strings.TrimSpace(string(line[4:])))
		}
		hash, name, ok := strings.Cut(strings.TrimSuffix(string(line), "\n"), " ")
		h := plumbing.NewHash(hash)
		if !ok || h.String() != hash || strings.Contains(name, " ") {
			// A v0 server answers a v2 request with an error or an
			// advertisement, never with bare "<hash> <ref>" lines.
			return nil, fmt.Errorf("%w: ls-refs reply %q", errNoV2, truncate(string(line), 60))
		}
		out[name] = h
	}
}

// fetch downloads want into st with the v2 fetch command: haves are commits
// st already has (the server then sends only what is new), depth > 0
// makes the fetch shallow. The pack streams into st through limitFetch;
// shallow boundaries the server reports are recorded in st.
func (c *v2Client) fetch(ctx context.Context, st storage.Storer, want plumbing.Hash, haves []plumbing.Hash, depth int, maxSize int64) error {
	return c.fetchBounded(ctx, st, want, haves, depth, maxSize, "")
}

// fetchCommits downloads the commit objects alone (filter tree:0, no
// trees or blobs) of want's history to depth: what strict verification
// walks when the checkout comes from a slice.
func (c *v2Client) fetchCommits(ctx context.Context, st storage.Storer, want plumbing.Hash, depth int, maxSize int64) error {
	return c.fetchBounded(ctx, st, want, nil, depth, maxSize, "tree:0")
}

// fetchBounded is fetchPack within the client's timeout, its errors
// classified.
func (c *v2Client) fetchBounded(ctx context.Context, st storage.Storer, want plumbing.Hash, haves []plumbing.Hash, depth int, maxSize int64, filter string) error {
	opCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.fetchPack(opCtx, st, want, haves, depth, maxSize, filter); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return fmt.Errorf("fetch %s: %w", c.ep.redacted, err)
		}
		return classifyV2(ctx, "fetch", c.ep.redacted, err)
	}
	return nil
}

func (c *v2Client) fetchPack(ctx context.Context, st storage.Storer, want plumbing.Hash, haves []plumbing.Hash, depth int, maxSize int64, filter string) error {
	args := []string{"ofs-delta", "no-progress", "want " + want.String()}
	for _, h := range haves {
		args = append(args, "have "+h.String())
	}
	if depth > 0 {
		args = append(args, "deepen "+strconv.Itoa(depth))
	}
	if filter != "" {
		args = append(args, "filter "+filter)
	}
	args = append(args, "done")
	body, err := c.command(ctx, "fetch", args)
	if err != nil {
		return err
	}
	defer body.Close()
	r := newPktReader(body)
	var shallow, unshallow []plumbing.Hash
	section := ""
	for section != "packfile" {
		kind, line, err := r.next()
		if err != nil {
			return err
		}
		switch kind {
		case pktDelim:
			section = ""
			continue
		case pktFlush, pktResponseEnd:
			return fmt.Errorf("%w: fetch reply ended without a pack", errNoV2)
		}
		text := strings.TrimSuffix(string(line), "\n")
		if strings.HasPrefix(text, "ERR ") {
			return fmt.Errorf("%w: %s", ErrRefNotFound, text[4:])
		}
		if section == "" {
			switch text {
			case "acknowledgments", "shallow-info", "wanted-refs", "packfile-uris", "packfile":
				section = text
				continue
			}
			return fmt.Errorf("%w: fetch reply %q", errNoV2, truncate(text, 60))
		}
		if section == "shallow-info" {
			verb, hash, _ := strings.Cut(text, " ")
			switch verb {
			case "shallow":
				shallow = append(shallow, plumbing.NewHash(hash))
			case "unshallow":
				unshallow = append(unshallow, plumbing.NewHash(hash))
			}
		}
	}
	if err := packfile.UpdateObjectStorage(limitFetch(st, maxSize), &sidebandReader{r: r}); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return err
		}
		return fmt.Errorf("receive pack: %w", err)
	}
	if len(shallow) > 0 || len(unshallow) > 0 {
		return updateShallow(st, shallow, unshallow)
	}
	return nil
}

// updateShallow records the shallow boundaries of a fetch.
func updateShallow(st storage.Storer, add, remove []plumbing.Hash) error {
	cur, err := st.Shallow()
	if err != nil {
		return err
	}
	drop := map[plumbing.Hash]bool{}
	for _, h := range remove {
		drop[h] = true
	}
	next := []plumbing.Hash{}
	seen := map[plumbing.Hash]bool{}
	for _, h := range append(cur, add...) {
		if !drop[h] && !seen[h] {
			seen[h] = true
			next = append(next, h)
		}
	}
	return st.SetShallow(next)
}

// classifyV2 is classify for the v2 client, whose HTTP errors are already
// classified.
func classifyV2(parent context.Context, op, remote string, err error) error {
	if parent.Err() == nil && (errors.Is(err, ErrAuth) || errors.Is(err, ErrRepoNotFound) || errors.Is(err, ErrUnreachable) || errors.Is(err, ErrRefNotFound)) {
		return fmt.Errorf("%s %s: %w", op, remote, err)
	}
	return classify(parent, op, remote, err)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// pkt-line kinds (gitprotocol-common(5), gitprotocol-v2(5)).
const (
	pktData = iota
	pktFlush
	pktDelim
	pktResponseEnd
)

// pktReader reads pkt-lines including v2's delim (0001) and response-end
// (0002) packets, which go-git v5's scanner rejects.
type pktReader struct {
	r   *bufio.Reader
	buf []byte
}

func newPktReader(r io.Reader) *pktReader {
	return &pktReader{r: bufio.NewReaderSize(r, 64<<10), buf: make([]byte, pktline.MaxPayloadSize)}
}

// next returns the next packet; data aliases an internal buffer valid until
// the following call.
func (p *pktReader) next() (int, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(p.r, hdr[:]); err != nil {
		return 0, nil, cutShort(err)
	}
	n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: bad pkt-line length %q", errNoV2, hdr[:])
	}
	switch {
	case n == 0:
		return pktFlush, nil, nil
	case n == 1:
		return pktDelim, nil, nil
	case n == 2:
		return pktResponseEnd, nil, nil
	case n < 4 || int(n)-4 > len(p.buf):
		return 0, nil, fmt.Errorf("%w: bad pkt-line length %d", errNoV2, n)
	}
	data := p.buf[:n-4]
	if _, err := io.ReadFull(p.r, data); err != nil {
		return 0, nil, cutShort(err)
	}
	return pktData, data, nil
}

// cutShort is the error of a response that ended before its last packet:
// the server or the connection went away, an outage.
func cutShort(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("read pkt-line: %w: response cut short: %w", ErrUnreachable, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("read pkt-line: %w", err)
}

// sidebandReader is the pack data (band 1) of a v2 packfile section; it
// ends at the flush-pkt. Band 3 is the server's fatal error.
type sidebandReader struct {
	r       *pktReader
	pending []byte
	done    bool
}

func (s *sidebandReader) Read(b []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.done {
			return 0, io.EOF
		}
		kind, data, err := s.r.next()
		if err != nil {
			return 0, err
		}
		if kind != pktData {
			s.done = true
			continue
		}
		if len(data) == 0 {
			continue
		}
		switch data[0] {
		case 1:
			s.pending = data[1:]
		case 2: // progress; no-progress was asked for, ignore what comes
		case 3:
			return 0, fmt.Errorf("remote error: %s", strings.TrimSpace(string(data[1:])))
		default:
			return 0, fmt.Errorf("%w: bad sideband %d", errNoV2, data[0])
		}
	}
	n := copy(b, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}
