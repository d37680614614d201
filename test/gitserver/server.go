package gitserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a running Git smart-HTTP server. Its methods are safe for
// concurrent use.
type Server struct {
	dir       string // root: repos/, hooks/, rules, home/
	reposDir  string
	hooksDir  string
	rulesPath string
	homeDir   string
	backend   string
	addr      string // host:port, fixed for the server's life

	mu       sync.Mutex
	users    map[string]string
	tokens   map[string]string // bearer token → user
	rules    []Rule
	anonRead bool
	v0Only   bool
	delay    time.Duration
	srv      *http.Server
	stats    map[string]*Stats
	closed   bool

	ssh *sshServer

	inflight sync.WaitGroup
	logs     *logBuffer
	stopCtx  func() bool
}

// Stats counts the requests a repository served. In protocol v0/v1 an
// ls-remote is one InfoRefs, a fetch is an InfoRefs plus one UploadPack,
// and a push is a ReceivePackInfoRefs plus one ReceivePack. In protocol v2
// an ls-refs is one LsRefs and a fetch one UploadPack (with an InfoRefs
// before each when the client discovers capabilities first, as the git CLI
// does).
type Stats struct {
	InfoRefs            int   // GET info/refs?service=git-upload-pack (ls-remote, fetch discovery)
	LsRefs              int   // POST git-upload-pack with the v2 command ls-refs
	UploadPacks         int   // POST git-upload-pack negotiating a pack (v0 fetch or clone, v2 fetch)
	ReceivePackInfoRefs int   // GET info/refs?service=git-receive-pack (push discovery)
	ReceivePacks        int   // POST git-receive-pack (a push)
	Unauthorized        int   // requests refused with 401
	BytesSent           int64 // response body bytes, all requests
	BytesReceived       int64 // request body bytes, all requests
	UploadPackBytesSent int64 // response bytes of git-upload-pack POSTs (the packs fetched)
	ReceivePackBytes    int64 // request bytes of git-receive-pack POSTs (the packs pushed)
	PushBytesSent       int64 // response bytes of pushes: receive-pack's ref advertisement (every ref, v0) and its report
	V2BytesSent         int64 // response bytes of requests in protocol v2 (Git-Protocol: version=2)
}

// Sub returns s minus before, to look at what happened in between.
func (s Stats) Sub(before Stats) Stats {
	return Stats{
		InfoRefs:            s.InfoRefs - before.InfoRefs,
		LsRefs:              s.LsRefs - before.LsRefs,
		UploadPacks:         s.UploadPacks - before.UploadPacks,
		ReceivePackInfoRefs: s.ReceivePackInfoRefs - before.ReceivePackInfoRefs,
		ReceivePacks:        s.ReceivePacks - before.ReceivePacks,
		Unauthorized:        s.Unauthorized - before.Unauthorized,
		BytesSent:           s.BytesSent - before.BytesSent,
		BytesReceived:       s.BytesReceived - before.BytesReceived,
		UploadPackBytesSent: s.UploadPackBytesSent - before.UploadPackBytesSent,
		ReceivePackBytes:    s.ReceivePackBytes - before.ReceivePackBytes,
		PushBytesSent:       s.PushBytesSent - before.PushBytesSent,
		V2BytesSent:         s.V2BytesSent - before.V2BytesSent,
	}
}

// Start starts a server for a test in t.TempDir(); it is closed when the test
// ends, and its request log is printed if the test failed.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(context.Background(), t.TempDir(), cfg)
	if err != nil {
		t.Fatalf("gitserver: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gitserver log (last %d lines):\n%s", logLines, s.Log())
		}
		s.Close()
	})
	return s
}

// New starts a server keeping its repositories under dir (created if
// missing). It serves until Close is called or ctx is done.
func New(ctx context.Context, dir string, cfg Config) (*Server, error) {
	for name := range cfg.Users {
		if err := validateUser(name); err != nil {
			return nil, err
		}
	}
	if err := validateRules(cfg.Rules); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	backend := cfg.Backend
	if backend == "" {
		if backend, err = findBackend(ctx); err != nil {
			return nil, err
		}
	}
	s := &Server{
		dir:       dir,
		reposDir:  filepath.Join(dir, "repos"),
		hooksDir:  filepath.Join(dir, "hooks"),
		rulesPath: filepath.Join(dir, "rules.tsv"),
		homeDir:   filepath.Join(dir, "home"),
		backend:   backend,
		users:     map[string]string{},
		tokens:    map[string]string{},
		rules:     append([]Rule(nil), cfg.Rules...),
		anonRead:  cfg.AnonymousRead,
		v0Only:    cfg.ProtocolV0Only,
		stats:     map[string]*Stats{},
		logs:      &logBuffer{},
	}
	for u, p := range cfg.Users {
		s.users[u] = p
	}
	for _, d := range []string{s.reposDir, s.homeDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := writeRules(s.rulesPath, s.rules); err != nil {
		return nil, err
	}
	if err := writeHook(s.hooksDir, s.rulesPath); err != nil {
		return nil, err
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	if cfg.SSH {
		host, _, _ := net.SplitHostPort(s.addr)
		if s.ssh, err = newSSHServer(s, net.JoinHostPort(host, "0")); err != nil {
			s.Stop()
			return nil, err
		}
	}
	s.stopCtx = context.AfterFunc(ctx, func() { s.Close() })
	return s, nil
}

func findBackend(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("git --exec-path (git is a prerequisite, see README.md): %w", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		// Part of Debian's git package; README.md lists the prerequisites.
		return "", fmt.Errorf("git http-backend (Debian package git; tools/prereqs.sh checks the prerequisites): %w", err)
	}
	return p, nil
}

func (s *Server) serve(ln net.Listener) {
	srv := &http.Server{
		Handler:           http.HandlerFunc(s.handle),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(s.logs, "http: ", 0),
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Addr is the server's host:port; it stays the same across Stop and Start.
func (s *Server) Addr() string { return s.addr }

// Dir is the directory holding the server's repositories and hook.
func (s *Server) Dir() string { return s.dir }

// URL is the clone URL of repo (without credentials).
func (s *Server) URL(repo string) string {
	return "http://" + s.addr + "/" + repo + ".git"
}

// UserURL is the clone URL of repo with user's credentials embedded, for the
// git CLI.
func (s *Server) UserURL(repo, user string) string {
	return "http://" + user + ":" + s.Password(user) + "@" + s.addr + "/" + repo + ".git"
}

// RepoPath is the on-disk path of repo's bare repository.
func (s *Server) RepoPath(repo string) string {
	return filepath.Join(s.reposDir, repo+".git")
}

// Password returns user's password, "" for an unknown user.
func (s *Server) Password(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users[user]
}

// AddUser adds (or replaces) a user and appends rules for it.
func (s *Server) AddUser(name, password string, rules ...Rule) error {
	if err := validateUser(name); err != nil {
		return err
	}
	if err := validateRules(rules); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[name] = password
	next := append(append([]Rule(nil), s.rules...), rules...)
	if err := writeRules(s.rulesPath, next); err != nil {
		return err
	}
	s.rules = next
	return nil
}

// AddToken lets user authenticate with "Authorization: Bearer token".
func (s *Server) AddToken(user, token string) error {
	if err := validateUser(user); err != nil {
		return err
	}
	if token == "" {
		return errors.New("gitserver: empty token")
	}
	s.mu.Lock()
	s.tokens[token] = user
	s.mu.Unlock()
	return nil
}

// SetRules replaces all push rules.
func (s *Server) SetRules(rules []Rule) error {
	if err := validateRules(rules); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := writeRules(s.rulesPath, rules); err != nil {
		return err
	}
	s.rules = append([]Rule(nil), rules...)
	return nil
}

// SetDelay makes every request wait d before being served (0 to stop), to
// exercise client timeouts. A request whose client goes away stops waiting.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}

// Stats returns the request counters of repo.
func (s *Server) Stats(repo string) Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.stats[repo]; st != nil {
		return *st
	}
	return Stats{}
}

// Stop closes the listeners (HTTP and SSH) and cuts every connection,
// simulating an outage. Start brings the server back on the same addresses.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	if s.ssh != nil {
		s.ssh.stop()
	}
}

// Start listens again on the same address after Stop. It retries briefly
// while the port is still held by the previous listener's sockets.
func (s *Server) Start() error {
	s.mu.Lock()
	running, closed := s.srv != nil, s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("gitserver: closed")
	}
	if running {
		return nil
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", s.addr); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("gitserver: relisten on %s: %w", s.addr, err)
	}
	s.serve(ln)
	if s.ssh != nil {
		return s.ssh.start()
	}
	return nil
}

// Close stops the server and waits (bounded) for in-flight git processes.
// The repositories stay on disk.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	if s.stopCtx != nil {
		s.stopCtx()
	}
	s.Stop()
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// Log returns the server's recent request log and git-http-backend stderr.
func (s *Server) Log() string { return s.logs.String() }

var repoPath = regexp.MustCompile(`^/(.+)\.git/(info/refs|git-upload-pack|git-receive-pack|HEAD|objects/.*)$`)

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	s.inflight.Add(1)
	defer s.inflight.Done()

	s.mu.Lock()
	delay := s.delay
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}

	m := repoPath.FindStringSubmatch(r.URL.Path)
	if m == nil || strings.Contains(m[1], "..") {
		http.NotFound(w, r)
		return
	}
	repo, op := m[1], m[2]
	service := r.URL.Query().Get("service")
	push := op == "git-receive-pack" || service == "git-receive-pack"

	user, pass, hasAuth := r.BasicAuth()
	cw := &countingWriter{ResponseWriter: w}
	defer func() {
		s.logs.Printf("%s %s %s user=%q status=%d sent=%d", r.Method, r.URL.Path, r.URL.RawQuery, user, cw.status(), cw.n)
	}()

	s.mu.Lock()
	want, known := s.users[user]
	anon := s.anonRead
	tokenUser, tokenOK := "", false
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		hasAuth = true
		tokenUser, tokenOK = s.tokens[token]
	}
	s.mu.Unlock()
	authed := hasAuth && known && subtle.ConstantTimeCompare([]byte(want), []byte(pass)) == 1
	if tokenOK {
		user, authed = tokenUser, true
	}
	if !authed && (hasAuth || push || !anon) {
		s.count(repo, func(st *Stats) { st.Unauthorized++ })
		cw.Header().Set("WWW-Authenticate", `Basic realm="flotilla gitserver"`)
		http.Error(cw, "authentication required", http.StatusUnauthorized)
		return
	}
	if !authed {
		user = ""
	}
	if _, err := os.Stat(s.RepoPath(repo)); err != nil {
		http.NotFound(cw, r)
		return
	}

	// CGI cannot take chunked bodies (the git CLI sends them above
	// http.postBuffer), so buffer them to give the backend a length.
	body := &countingReader{r: r.Body}
	r.Body = io.NopCloser(body)
	if len(r.TransferEncoding) > 0 {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(cw, "read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		r.ContentLength = int64(len(data))
		r.TransferEncoding = nil
	}
	// git http-backend takes the protocol version from HTTP_GIT_PROTOCOL,
	// as forges pass it on (unless configured as an old, v0-only one). The
	// credentials must not reach the CGI environment.
	if s.v0Only {
		r.Header.Del("Git-Protocol")
	}
	r.Header.Del("Authorization")
	v2 := strings.Contains(r.Header.Get("Git-Protocol"), "version=2")
	lsRefs := false
	if op == "git-upload-pack" && v2 {
		// Tell a v2 ls-refs from a fetch by its first pkt-line.
		br := bufio.NewReader(r.Body)
		head, _ := br.Peek(len("0014command=ls-refs"))
		lsRefs = strings.HasSuffix(string(head), "command=ls-refs")
		r.Body = io.NopCloser(br)
	}

	env := []string{
		"GIT_PROJECT_ROOT=" + s.reposDir,
		"GIT_HTTP_EXPORT_ALL=1",
		"HOME=" + s.homeDir,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
	}
	if user != "" {
		env = append(env, "REMOTE_USER="+user)
	}
	h := &cgi.Handler{
		Path:   s.backend,
		Root:   "/",
		Dir:    s.reposDir,
		Env:    env,
		Logger: log.New(s.logs, "cgi: ", 0),
		Stderr: s.logs,
	}
	h.ServeHTTP(cw, r)

	s.count(repo, func(st *Stats) {
		st.BytesSent += cw.n
		st.BytesReceived += body.n
		if service == "git-receive-pack" || op == "git-receive-pack" {
			st.PushBytesSent += cw.n
		}
		if v2 {
			st.V2BytesSent += cw.n
		}
		switch {
		case op == "info/refs" && service == "git-upload-pack":
			st.InfoRefs++
		case op == "info/refs" && service == "git-receive-pack":
			st.ReceivePackInfoRefs++
		case op == "git-upload-pack" && lsRefs:
			st.LsRefs++
		case op == "git-upload-pack":
			st.UploadPacks++
			st.UploadPackBytesSent += cw.n
		case op == "git-receive-pack":
			st.ReceivePacks++
			st.ReceivePackBytes += body.n
		}
	})
}

func (s *Server) count(repo string, f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats[repo]
	if st == nil {
		st = &Stats{}
		s.stats[repo] = st
	}
	f(st)
}

type countingWriter struct {
	http.ResponseWriter
	n    int64
	code int
}

func (c *countingWriter) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingWriter) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// logLines bounds the kept log so a long benchmark does not grow memory.
const logLines = 400

type logBuffer struct {
	mu    sync.Mutex
	lines []string
	part  []byte
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.part[:i]))
		l.part = l.part[i+1:]
	}
	if over := len(l.lines) - logLines; over > 0 {
		l.lines = append([]string(nil), l.lines[over:]...)
	}
	return len(p), nil
}

func (l *logBuffer) Printf(format string, args ...any) {
	fmt.Fprintf(l, format+"\n", args...)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n") + string(l.part)
}
