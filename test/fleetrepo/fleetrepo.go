package fleetrepo

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// Repo is a working directory pushed to repository Name of Server.
type Repo struct {
	Server *gitserver.Server
	Name   string
	Dir    string
	URL    string
	last   map[string]string // path → content at the last push
}

// New creates repository name on srv from what dir holds (its first
// commit).
func New(t testing.TB, srv *gitserver.Server, name, dir string) *Repo {
	t.Helper()
	r := &Repo{Server: srv, Name: name, Dir: dir}
	r.URL = srv.MustCreateRepo(t, name, dir)
	r.last = treefile.Read(t, dir)
	return r
}

// Head is the branch head in the agent's notation (main@sha1:<hash>).
func (r *Repo) Head() string { return "main@sha1:" + r.Server.Head(r.Name, "main") }

// changes are the files changed since the last push (nil: deleted) and
// the working directory now.
func (r *Repo) changes(t testing.TB) (map[string][]byte, map[string]string) {
	now := treefile.Read(t, r.Dir)
	files := map[string][]byte{}
	for p, c := range now {
		if old, ok := r.last[p]; !ok || old != c {
			files[p] = []byte(c)
		}
	}
	for p := range r.last {
		if _, ok := now[p]; !ok {
			files[p] = nil
		}
	}
	return files, now
}

// Push commits what changed since the last push as the maintainer and
// returns the new Head.
func (r *Repo) Push(t testing.TB, msg string) string {
	t.Helper()
	changed, now := r.changes(t)
	files := map[string]string{}
	var deletes []string
	for p, c := range changed {
		if c == nil {
			deletes = append(deletes, p)
		} else {
			files[p] = string(c)
		}
	}
	sort.Strings(deletes)
	r.Server.Commit(t, r.Name, gitserver.Maintainer, files, deletes, msg)
	r.last = now
	return r.Head()
}

// PushSigned is Push with a commit signed by signer.
func (r *Repo) PushSigned(t testing.TB, msg string, signer signature.Signer) string {
	t.Helper()
	files, now := r.changes(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := gitrepo.PushFiles(ctx, r.URL, "refs/heads/main", files, msg,
		gitrepo.Signature{Name: "Fleet Maintainer", Email: "maintainer@example.com"},
		gitrepo.PushOptions{Auth: gitrepo.Auth{Username: gitserver.Maintainer, Password: r.Server.Password(gitserver.Maintainer)}, Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	r.last = now
	return "main@sha1:" + res.Hash
}

// Write writes a file of the working directory.
func (r *Repo) Write(t testing.TB, rel, content string) {
	t.Helper()
	treefile.Write(t, r.Dir, map[string]string{rel: content})
}

// Remove deletes a file or directory of the working directory.
func (r *Repo) Remove(t testing.TB, rel string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(r.Dir, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

// Read is a file of the working directory.
func (r *Repo) Read(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Edit replaces the first old by new in a file, failing when old is
// absent.
func (r *Repo) Edit(t testing.TB, rel, old, new string) {
	t.Helper()
	s := r.Read(t, rel)
	if !strings.Contains(s, old) {
		t.Fatalf("%s does not contain %q", rel, old)
	}
	r.Write(t, rel, strings.Replace(s, old, new, 1))
}
