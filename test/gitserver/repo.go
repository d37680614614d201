package gitserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// ErrPushRejected is returned by Push when the server refused the update
// (the pre-receive hook or receive-pack said no).
var ErrPushRejected = errors.New("push rejected")

var repoName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$`)

// CreateRepo creates the bare repository name and returns its URL. When
// fromDir is not empty, its content (respecting its .gitignore files) becomes
// the initial commit of main; otherwise the repository is empty.
func (s *Server) CreateRepo(name, fromDir string) (string, error) {
	if !repoName.MatchString(name) || strings.Contains(name, "..") {
		return "", fmt.Errorf("invalid repository name %q", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bare := s.RepoPath(name)
	if _, err := os.Stat(bare); err == nil {
		return "", fmt.Errorf("repository %q exists", name)
	}
	if _, err := s.git(ctx, "", nil, "init", "-q", "--bare", "--initial-branch=main", bare); err != nil {
		return "", err
	}
	for _, kv := range [][2]string{
		{"core.hooksPath", s.hooksDir},
		// No background gc: it would outlive the test and race the pushes.
		{"gc.auto", "0"},
		{"receive.autogc", "false"},
		// Let the git CLI measure partial clone against shallow fetch.
		{"uploadpack.allowFilter", "true"},
		{"uploadpack.allowAnySHA1InWant", "true"},
	} {
		if _, err := s.git(ctx, "", nil, "--git-dir="+bare, "config", kv[0], kv[1]); err != nil {
			return "", err
		}
	}
	if fromDir != "" {
		if err := s.importDir(ctx, bare, fromDir); err != nil {
			return "", err
		}
	}
	return s.URL(name), nil
}

// MustCreateRepo is CreateRepo failing the test on error. The repository
// is removed when the test ends, so a test run again (go test -count=N) on
// a shared server can create it again.
func (s *Server) MustCreateRepo(t testing.TB, name, fromDir string) string {
	t.Helper()
	url, err := s.CreateRepo(name, fromDir)
	if err != nil {
		t.Fatalf("gitserver: create repo %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := s.RemoveRepo(name); err != nil {
			t.Errorf("gitserver: %v", err)
		}
	})
	return url
}

// RemoveRepo frees the name of repository name and its request counters.
// The repository moves out of the served tree at once (a request still in
// flight, such as a status push of an agent shutting down, may be writing
// to it) and is deleted as far as it can be.
func (s *Server) RemoveRepo(name string) error {
	if !repoName.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("invalid repository name %q", name)
	}
	trash := filepath.Join(s.dir, "removed")
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return fmt.Errorf("remove repository %s: %w", name, err)
	}
	moved, err := os.MkdirTemp(trash, "repo-")
	if err != nil {
		return fmt.Errorf("remove repository %s: %w", name, err)
	}
	if err := os.Rename(s.RepoPath(name), filepath.Join(moved, "repo.git")); err != nil {
		return fmt.Errorf("remove repository %s: %w", name, err)
	}
	_ = os.RemoveAll(moved) // best effort: a late writer may keep a directory alive
	s.mu.Lock()
	delete(s.stats, name)
	s.mu.Unlock()
	return nil
}

// importDir commits the content of dir as the root commit of main, straight
// into the bare repository (plumbing, no HTTP, so it does not show in Stats).
func (s *Server) importDir(ctx context.Context, bare, dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	index, err := os.CreateTemp(s.dir, "index-*")
	if err != nil {
		return err
	}
	index.Close()
	os.Remove(index.Name()) // git wants to create it itself
	defer os.Remove(index.Name())
	env := []string{"GIT_INDEX_FILE=" + index.Name()}
	if _, err := s.git(ctx, "", env, "--git-dir="+bare, "--work-tree="+dir, "add", "-A", "."); err != nil {
		return err
	}
	tree, err := s.git(ctx, "", env, "--git-dir="+bare, "write-tree")
	if err != nil {
		return err
	}
	commit, err := s.git(ctx, "", authorEnv(Maintainer), "--git-dir="+bare, "commit-tree", tree, "-m", "initial commit")
	if err != nil {
		return err
	}
	_, err = s.git(ctx, "", nil, "--git-dir="+bare, "update-ref", "refs/heads/main", commit)
	return err
}

// Change is one commit pushed over HTTP by Push.
type Change struct {
	Branch  string            // branch to update; "main" when empty
	Files   map[string]string // path → content to write (created or replaced)
	Deletes []string          // paths (files or directories) to remove
	Message string            // commit message; a default when empty
	// Orphan makes the commit a new root instead of building on the branch
	// head; pushing it over an existing branch needs Force.
	Orphan bool
	Force  bool // push with --force
}

// Push commits c as user with the git CLI (a depth-1 fetch of the branch, the
// edits, a commit, a push over HTTP with user's credentials) and returns the
// new commit hash. A refusal by the server is an ErrPushRejected carrying the
// server's message.
func (s *Server) Push(ctx context.Context, repo, user string, c Change) (string, error) {
	branch := c.Branch
	if branch == "" {
		branch = "main"
	}
	msg := c.Message
	if msg == "" {
		msg = "change by " + user
	}
	work, err := os.MkdirTemp(s.dir, "work-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	// Credentials go in a header up front: the CLI would otherwise try
	// every request anonymously first and double the request count.
	url := s.URL(repo)
	auth := []string{"-c", "http.extraHeader=Authorization: Basic " +
		base64.StdEncoding.EncodeToString([]byte(user+":"+s.Password(user)))}
	if s.refExists(repo, "refs/heads/"+branch) && !c.Orphan {
		if _, err := s.git(ctx, "", nil, append(auth, "clone", "-q", "--depth=1", "--single-branch", "--branch="+branch, url, work)...); err != nil {
			return "", err
		}
	} else if _, err := s.git(ctx, work, nil, "init", "-q", "--initial-branch="+branch); err != nil {
		return "", err
	}
	if len(c.Deletes) > 0 {
		for _, p := range c.Deletes {
			if err := checkRelPath(p); err != nil {
				return "", err
			}
		}
		args := append([]string{"rm", "-q", "-r", "--ignore-unmatch", "--"}, c.Deletes...)
		if _, err := s.git(ctx, work, nil, args...); err != nil {
			return "", err
		}
	}
	names := make([]string, 0, len(c.Files))
	for p := range c.Files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if err := checkRelPath(p); err != nil {
			return "", err
		}
		full := filepath.Join(work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(c.Files[p]), 0o644); err != nil {
			return "", err
		}
	}
	if _, err := s.git(ctx, work, nil, "add", "-A", "."); err != nil {
		return "", err
	}
	if _, err := s.git(ctx, work, authorEnv(user), "commit", "-q", "--allow-empty", "-m", msg); err != nil {
		return "", err
	}
	hash, err := s.git(ctx, work, nil, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	args := append(auth, "push", "--porcelain")
	if c.Force {
		args = append(args, "--force")
	}
	args = append(args, url, "HEAD:refs/heads/"+branch)
	out, err := s.gitOutput(ctx, work, nil, args...)
	if err != nil {
		if reason := rejection(out.stdout); reason != "" {
			return "", fmt.Errorf("%w: refs/heads/%s by %s: %s: %s", ErrPushRejected, branch, user, reason, remoteLines(out.stderr))
		}
		return "", fmt.Errorf("git push: %w: %s", err, strings.TrimSpace(out.stderr))
	}
	return hash, nil
}

// Commit pushes files and deletes to main as user and returns the new commit
// hash, failing the test on any error.
func (s *Server) Commit(t testing.TB, repo, user string, files map[string]string, deletes []string, msg string) string {
	t.Helper()
	// Generous: a benchmark's repo of 10,000 clusters on a busy machine
	// took more than 2 minutes to commit to.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	hash, err := s.Push(ctx, repo, user, Change{Files: files, Deletes: deletes, Message: msg})
	if err != nil {
		t.Fatalf("gitserver: commit to %s as %s: %v", repo, user, err)
	}
	return hash
}

// refExists looks for a ref in repo's files, loose or packed, without
// spawning git.
func (s *Server) refExists(repo, ref string) bool {
	if _, err := os.Stat(filepath.Join(s.RepoPath(repo), filepath.FromSlash(ref))); err == nil {
		return true
	}
	packed, err := os.ReadFile(filepath.Join(s.RepoPath(repo), "packed-refs"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(packed), "\n") {
		if _, name, ok := strings.Cut(line, " "); ok && name == ref {
			return true
		}
	}
	return false
}

// Head returns the hash branch points to in repo, read from disk ("" when
// the branch does not exist).
func (s *Server) Head(repo, branch string) string {
	out, err := s.git(context.Background(), "", nil, "--git-dir="+s.RepoPath(repo), "rev-parse", "--verify", "-q", "refs/heads/"+branch)
	if err != nil {
		return ""
	}
	return out
}

// Refs returns every ref of repo with its hash, read from disk.
func (s *Server) Refs(repo string) (map[string]string, error) {
	out, err := s.git(context.Background(), "", nil, "--git-dir="+s.RepoPath(repo), "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if hash, name, ok := strings.Cut(sc.Text(), " "); ok {
			refs[name] = hash
		}
	}
	return refs, nil
}

func checkRelPath(p string) error {
	clean := path.Clean(p)
	if p == "" || path.IsAbs(p) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("invalid path %q", p)
	}
	return nil
}

// rejection extracts the reason of a rejected ref from `git push
// --porcelain` output ("!\tsrc:dst\t[remote rejected] (reason)").
func rejection(porcelain string) string {
	for _, line := range strings.Split(porcelain, "\n") {
		if strings.HasPrefix(line, "!\t") {
			parts := strings.SplitN(line, "\t", 3)
			if len(parts) == 3 {
				return parts[2]
			}
			return line
		}
	}
	return ""
}

func remoteLines(stderr string) string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "remote: ") {
			out = append(out, strings.TrimPrefix(l, "remote: "))
		}
	}
	return strings.Join(out, "; ")
}

func authorEnv(user string) []string {
	email := user + "@flotilla.invalid"
	return []string{
		"GIT_AUTHOR_NAME=" + user, "GIT_AUTHOR_EMAIL=" + email,
		"GIT_COMMITTER_NAME=" + user, "GIT_COMMITTER_EMAIL=" + email,
	}
}

type gitOut struct{ stdout, stderr string }

func (s *Server) git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	out, err := s.gitOutput(ctx, dir, env, args...)
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(out.stderr))
	}
	return strings.TrimSpace(out.stdout), nil
}

// gitOutput runs the git CLI isolated from the user's and system's config.
func (s *Server) gitOutput(ctx context.Context, dir string, env []string, args ...string) (gitOut, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"HOME="+s.homeDir,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
	)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return gitOut{stdout.String(), stderr.String()}, err
}
