package gitea

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// startTimeout bounds how long Gitea may take to answer.
const startTimeout = 2 * time.Minute

// Server is a running Gitea.
type Server struct {
	// URL is http://127.0.0.1:<port> (no trailing slash).
	URL string
	// Username and Password are the admin's; Token is an API token of the
	// admin's with every scope.
	Username, Password, Token string

	dir string
	cmd *exec.Cmd
	log bytes.Buffer
}

// Paths are bin/gitea and the static files it reads (templates,
// locales), or an error wrapping testenv.ErrToolMissing.
func Paths() (bin, static string, err error) {
	dir, err := testenv.BinDir()
	if err != nil {
		return "", "", err
	}
	bin, static = filepath.Join(dir, "gitea"), filepath.Join(dir, "gitea-data")
	for _, p := range []string{bin, static} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("%s (build it with `tools/build.sh bin gitea`): %w", p, testenv.ErrToolMissing)
		}
	}
	return bin, static, nil
}

// Start starts Gitea for the test and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, static, err := Paths()
	if err != nil {
		if testing.Short() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	s := &Server{dir: t.TempDir(), Username: "flotilla", Password: "flotilla-" + random(8)}
	t.Cleanup(s.stop)
	if err := s.start(bin, static); err != nil {
		t.Fatalf("start gitea: %v\n%s", err, s.log.String())
	}
	return s
}

func (s *Server) start(bin, static string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	ini := filepath.Join(s.dir, "app.ini")
	config := fmt.Sprintf(`APP_NAME = flotilla-test
RUN_MODE = prod
RUN_USER = %[1]s
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true
WORK_PATH = %[2]s

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[3]d
ROOT_URL = %[4]s/
DOMAIN = 127.0.0.1
DISABLE_SSH = true
OFFLINE_MODE = true
STATIC_ROOT_PATH = %[5]s
APP_DATA_PATH = %[2]s/data
LFS_START_SERVER = false

[database]
DB_TYPE = sqlite3
PATH = %[2]s/gitea.db

[repository]
ROOT = %[2]s/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = %[6]s
INTERNAL_TOKEN = %[7]s
PASSWORD_HASH_ALGO = pbkdf2_hi

[service]
DISABLE_REGISTRATION = true

[oauth2]
ENABLED = false

[actions]
ENABLED = false

[cron]
ENABLED = false

[mailer]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[webhook]
ALLOWED_HOST_LIST = loopback

[log]
MODE = console
LEVEL = warn
ROOT_PATH = %[2]s/log
`, currentUser(), s.dir, port, s.URL, static, random(32), random(32))
	if err := os.WriteFile(ini, []byte(config), 0o600); err != nil {
		return err
	}
	env := []string{"HOME=" + s.dir, "PATH=" + os.Getenv("PATH"), "GITEA_WORK_DIR=" + s.dir, "GITEA_CUSTOM=" + filepath.Join(s.dir, "custom")}
	s.cmd = exec.Command(bin, "web", "--config", ini)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	if err := s.waitReady(exited); err != nil {
		return err
	}
	admin := exec.Command(bin, "admin", "user", "create", "--config", ini, "--admin", "--username", s.Username,
		"--password", s.Password, "--email", s.Username+"@example.com", "--must-change-password=false")
	admin.Env = env
	if out, err := admin.CombinedOutput(); err != nil {
		return fmt.Errorf("gitea admin user create: %v: %s", err, out)
	}
	var tok struct {
		SHA1 string `json:"sha1"`
	}
	if err := s.call(context.Background(), http.MethodPost, "/api/v1/users/"+s.Username+"/tokens", true,
		map[string]any{"name": "flotilla-test", "scopes": []string{"all"}}, &tok); err != nil {
		return fmt.Errorf("create token: %w", err)
	}
	s.Token = tok.SHA1
	return nil
}

func (s *Server) waitReady(exited <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c := &http.Client{Timeout: 5 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/healthz", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("gitea exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("gitea not ready after %s: %v", startTimeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_, _ = s.cmd.Process.Wait()
	s.cmd = nil
}

// Log is what Gitea printed.
func (s *Server) Log() string { return s.log.String() }

// CreateRepo creates an empty repository of the admin's and returns its
// Git URL with the admin's credentials in it.
func (s *Server) CreateRepo(t testing.TB, name string) string {
	t.Helper()
	if err := s.call(context.Background(), http.MethodPost, "/api/v1/user/repos", false,
		map[string]any{"name": name, "default_branch": "main", "private": false}, nil); err != nil {
		t.Fatalf("create repo %s: %v", name, err)
	}
	return s.GitURL(name)
}

// GitURL is the repository's smart-HTTP URL with the admin's
// credentials.
func (s *Server) GitURL(repo string) string {
	return strings.Replace(s.URL, "http://", "http://"+s.Username+":"+s.Password+"@", 1) + "/" + s.Username + "/" + repo + ".git"
}

// Repo is the admin's repository's "owner/name".
func (s *Server) Repo(name string) string { return s.Username + "/" + name }

// API calls Gitea's API as the admin (with the token) and decodes the
// answer into out (when not nil).
func (s *Server) API(ctx context.Context, method, path string, body, out any) error {
	return s.call(ctx, method, path, false, body, out)
}

func (s *Server) call(ctx context.Context, method, path string, basic bool, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if basic {
		req.SetBasicAuth(s.Username, s.Password)
	} else {
		req.Header.Set("Authorization", "token "+s.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		return "root"
	}
	return strings.TrimSpace(string(out))
}

// CreatePull opens a pull request of the admin's repository from head to
// base and returns its number. Gitea records pushed branches after the
// push returns (a queue behind its post-receive hook), so it first waits
// until both branches are known.
func (s *Server) CreatePull(t testing.TB, repo, head, base string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, branch := range []string{base, head} {
		s.waitFor(ctx, t, "branch "+branch+" of "+repo+" to appear", func() (bool, error) {
			err := s.call(ctx, http.MethodGet, "/api/v1/repos/"+s.Repo(repo)+"/branches/"+branch, false, nil, nil)
			return err == nil, err
		})
	}
	var pr struct {
		Number int `json:"number"`
	}
	if err := s.call(ctx, http.MethodPost, "/api/v1/repos/"+s.Repo(repo)+"/pulls", false,
		map[string]string{"head": head, "base": base, "title": head}, &pr); err != nil {
		t.Fatalf("open pull request %s → %s: %v", head, base, err)
	}
	return pr.Number
}

// WaitMergeable waits until Gitea has checked that pull request number
// merges without conflicts (it checks in a queue after the pull request
// is opened); whether its branch protection lets it merge is not judged.
func (s *Server) WaitMergeable(t testing.TB, repo string, number int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s.waitFor(ctx, t, fmt.Sprintf("pull request #%d of %s to be mergeable", number, repo), func() (bool, error) {
		var pr struct {
			Mergeable bool `json:"mergeable"`
		}
		err := s.call(ctx, http.MethodGet, fmt.Sprintf("/api/v1/repos/%s/pulls/%d", s.Repo(repo), number), false, nil, &pr)
		return err == nil && pr.Mergeable, err
	})
}

// waitFor polls done until it is true, failing the test when ctx ends.
func (s *Server) waitFor(ctx context.Context, t testing.TB, what string, done func() (bool, error)) {
	t.Helper()
	for {
		ok, err := done()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waited for %s: %v", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Commit commits files (path → content) on top of branch of the admin's
// repository, pushing over Git smart-HTTP, and returns the commit's hash.
func (s *Server) Commit(t testing.TB, repo, branch string, files map[string]string, msg string) string {
	t.Helper()
	data := make(map[string][]byte, len(files))
	for p, c := range files {
		data[p] = []byte(c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	res, err := gitrepo.PushFiles(ctx, s.GitURL(repo), "refs/heads/"+branch, data, msg,
		gitrepo.Signature{Name: "test", Email: "test@example.com"}, gitrepo.PushOptions{})
	if err != nil {
		t.Fatalf("commit to %s of %s: %v", branch, repo, err)
	}
	return res.Hash
}
