package gitsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/render"
)

// Layout and limits.
const (
	// Dir holds every vendored source; it is generated.
	Dir = "sources"
	// LockKind is the kind of a lock file.
	LockKind       = "SourceLock"
	lockAPIVersion = "flotilla.dev/v1alpha1"
	lockSuffix     = ".lock.yaml"
	maxLockSize    = 64 << 10
	// MaxFiles bounds the files of one vendored source. The agent has no
	// such limit of its own (it checks out what the hub committed); this
	// one keeps a source from flooding the fleet repo.
	MaxFiles = 10000
)

// VendorDir is the repo-relative directory app's source is vendored into.
func VendorDir(app string) string { return Dir + "/" + app }

// LockFile is the repo-relative lock file of app's source.
func LockFile(app string) string { return Dir + "/" + app + lockSuffix }

// Ref is a source's ref: exactly one field is set.
type Ref struct {
	Branch string `json:"branch,omitempty"`
	Tag    string `json:"tag,omitempty"`
	Commit string `json:"commit,omitempty"`
}

func (r Ref) String() string { return r.treeRef().String() }

func (r Ref) treeRef() gitrepo.TreeRef {
	return gitrepo.TreeRef{Branch: r.Branch, Tag: r.Tag, Commit: r.Commit}
}

// Spec is one application's spec.source.git.
type Spec struct {
	App  string
	URL  string
	Ref  Ref
	Path string
	// File and Line locate the application's spec.source.git, for messages.
	File string
	Line int
}

// Lock is the content of a lock file.
type Lock struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// URL is the source's URL without credentials.
	URL  string `json:"url"`
	Ref  Ref    `json:"ref"`
	Path string `json:"path,omitempty"`
	// Commit is the pinned commit; Tree the Git hash of its tree at Path,
	// which the vendored copy must hash to (gitrepo.DirTreeHash).
	Commit string `json:"commit"`
	Tree   string `json:"tree"`
}

// Options tune Vendor.
type Options struct {
	// Update resolves every ref again (flotilla render --update-sources).
	Update bool
	// Check writes nothing and uses no network; stale sources are a
	// *StaleError.
	Check bool
	// Auth is used for every source's remote.
	Auth gitrepo.Auth
	// Timeout bounds each network operation (gitrepo.DefaultTimeout when zero).
	Timeout time.Duration
	// Limits override the default limits (tests); zero fields are defaults.
	Limits gitrepo.TreeLimits
}

// Result is what Vendor did with one source.
type Result struct {
	App    string
	URL    string // without credentials
	Ref    Ref
	Path   string
	Commit string
	Tree   string
	// Dir and Lock are repo-relative.
	Dir  string
	Lock string
	// Action is "unchanged", "vendored" (new, or its spec changed),
	// "updated" (its ref moved, with Update) or "restored" (the copy had
	// drifted from the pinned commit).
	Action string
}

// ErrStale classifies a *StaleError.
var ErrStale = errors.New("vendored Git sources are stale")

// StaleError lists what Check found stale, one problem per source.
type StaleError struct {
	Problems []Problem
}

// Problem is one stale source.
type Problem struct {
	App  string
	File string // the lock file or vendored directory at fault
	Why  string
}

func (p Problem) String() string {
	if p.App == "" {
		return p.File + ": " + p.Why
	}
	return fmt.Sprintf("application %s: %s: %s", p.App, p.File, p.Why)
}

func (e *StaleError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return ErrStale.Error() + ":\n  " + strings.Join(lines, "\n  ")
}

func (e *StaleError) Unwrap() error { return ErrStale }

// Vendor makes every spec's source current under sources/ of the fleet
// repo at root (see the package documentation) and returns one Result per
// spec, sorted by application. specs must be every Git source of the repo:
// what sources/ holds for no spec is removed.
func Vendor(ctx context.Context, root string, specs []Spec, opts Options) ([]Result, error) {
	specs = append([]Spec(nil), specs...)
	sort.Slice(specs, func(i, j int) bool { return specs[i].App < specs[j].App })
	v := &vendorer{ctx: ctx, root: root, opts: opts}
	var out []Result
	var stale []Problem
	for _, s := range specs {
		r, problem, err := v.one(s)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: spec.source.git: application %s: %w", s.File, s.Line, s.App, err)
		}
		if problem != nil {
			stale = append(stale, *problem)
		}
		out = append(out, r)
	}
	leftover, err := v.leftovers(specs)
	if err != nil {
		return nil, err
	}
	for _, p := range leftover {
		if opts.Check {
			stale = append(stale, Problem{File: p, Why: "no application has this Git source any more; run flotilla render to remove it"})
		} else if err := os.RemoveAll(v.abs(p)); err != nil {
			return nil, err
		}
	}
	if len(stale) > 0 {
		return out, &StaleError{Problems: stale}
	}
	return out, nil
}

type vendorer struct {
	ctx  context.Context
	root string
	opts Options
}

func (v *vendorer) abs(rel string) string { return filepath.Join(v.root, filepath.FromSlash(rel)) }

// one vendors one source; in Check mode a stale source is a Problem.
func (v *vendorer) one(s Spec) (Result, *Problem, error) {
	r := Result{
		App: s.App, URL: redact.URL(s.URL), Ref: s.Ref, Path: cleanPath(s.Path),
		Dir: VendorDir(s.App), Lock: LockFile(s.App),
	}
	lock, err := v.readLock(r.Lock)
	if err != nil {
		return r, nil, err
	}
	matches := lock != nil && lock.URL == r.URL && lock.Ref == r.Ref && lock.Path == r.Path
	intact := false
	if lock != nil {
		r.Commit, r.Tree = lock.Commit, lock.Tree
		intact = v.hashes(r.Dir, lock.Tree)
	}
	if v.opts.Check {
		p := &Problem{App: s.App, File: r.Lock}
		switch {
		case lock == nil:
			p.Why = "not vendored (no lock file); run flotilla render"
		case !matches:
			p.Why = fmt.Sprintf("pins %s %s path %q but the application asks for %s %s path %q; run flotilla render", lock.URL, lock.Ref, lock.Path, r.URL, r.Ref, r.Path)
		case !intact:
			p.File = r.Dir + "/"
			p.Why = fmt.Sprintf("no longer matches tree %s of the pinned commit %s (edited by hand?); run flotilla render to restore it", lock.Tree, lock.Commit)
		default:
			r.Action = "unchanged"
			return r, nil, nil
		}
		return r, p, nil
	}
	var commit string
	switch {
	case matches && !v.opts.Update:
		if intact {
			r.Action = "unchanged"
			return r, nil, nil
		}
		commit, r.Action = lock.Commit, "restored"
	default:
		commit, err = gitrepo.ResolveRef(v.ctx, s.URL, v.opts.Auth, v.opts.Timeout, s.Ref.treeRef())
		if err != nil {
			return r, nil, err
		}
		switch {
		case !matches:
			r.Action = "vendored"
		case commit == lock.Commit && intact:
			r.Action = "unchanged"
			return r, nil, nil
		case commit == lock.Commit:
			r.Action = "restored"
		default:
			r.Action = "updated"
		}
	}
	tree, err := v.fetch(s, r, commit)
	if err != nil {
		return r, nil, err
	}
	r.Commit, r.Tree = commit, tree
	return r, nil, v.writeLock(r)
}

// fetch writes the subtree of commit beside the vendored directory, checks
// it hashes to the commit's tree, and swaps it in.
func (v *vendorer) fetch(s Spec, r Result, commit string) (string, error) {
	if err := os.MkdirAll(v.abs(Dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(v.abs(Dir), ".tmp-"+s.App+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	res, err := gitrepo.FetchTree(v.ctx, gitrepo.TreeRequest{
		URL: s.URL, Auth: v.opts.Auth, Timeout: v.opts.Timeout,
		Commit: commit, Path: r.Path, Dest: tmp, Limits: v.limits(),
	})
	if err != nil {
		return "", err
	}
	got, err := gitrepo.DirTreeHash(tmp)
	if err != nil {
		return "", err
	}
	if got != res.Tree {
		// E.g. an empty directory or an unusual file mode in the source:
		// the copy could never be checked against the commit.
		return "", fmt.Errorf("commit %s path %q cannot be vendored faithfully (its tree %s is written as %s)", commit, r.Path, res.Tree, got)
	}
	dir := v.abs(r.Dir)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return res.Tree, nil
}

func (v *vendorer) limits() gitrepo.TreeLimits {
	l := v.opts.Limits
	if l.MaxFileSize == 0 {
		l.MaxFileSize = render.DefaultMaxFileSize
	}
	if l.MaxTotalSize == 0 {
		l.MaxTotalSize = render.DefaultMaxTotalSize
	}
	if l.MaxFiles == 0 {
		l.MaxFiles = MaxFiles
	}
	return l
}

// hashes reports whether the repo directory rel exists and has Git tree
// hash want.
func (v *vendorer) hashes(rel, want string) bool {
	fi, err := os.Lstat(v.abs(rel))
	if err != nil || !fi.IsDir() {
		return false
	}
	got, err := gitrepo.DirTreeHash(v.abs(rel))
	return err == nil && got == want
}

func (v *vendorer) readLock(rel string) (*Lock, error) {
	data, err := readBounded(v.abs(rel), maxLockSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	var l Lock
	if err := yaml.UnmarshalStrict(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	if l.Kind != LockKind || l.APIVersion != lockAPIVersion {
		return nil, fmt.Errorf("%s: not a %s %s", rel, lockAPIVersion, LockKind)
	}
	return &l, nil
}

const lockHeader = "# Generated by flotilla render: the pinned commit of this application's Git source,\n" +
	"# vendored beside this file. Do not edit; `flotilla render --update-sources` moves a\n" +
	"# branch or tag to its current commit.\n"

func (v *vendorer) writeLock(r Result) error {
	data, err := yaml.Marshal(Lock{
		APIVersion: lockAPIVersion, Kind: LockKind,
		URL: r.URL, Ref: r.Ref, Path: r.Path, Commit: r.Commit, Tree: r.Tree,
	})
	if err != nil {
		return err
	}
	data = append([]byte(lockHeader), data...)
	p := v.abs(r.Lock)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return os.WriteFile(p, data, 0o644)
}

// leftovers lists the repo-relative entries of sources/ no spec owns.
func (v *vendorer) leftovers(specs []Spec) ([]string, error) {
	entries, err := os.ReadDir(v.abs(Dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	owned := map[string]bool{}
	for _, s := range specs {
		owned[s.App] = true
		owned[s.App+lockSuffix] = true
	}
	var out []string
	for _, e := range entries {
		if !owned[e.Name()] {
			out = append(out, Dir+"/"+e.Name())
		}
	}
	return out, nil
}

func readBounded(p string, max int64) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%d bytes is more than %d", fi.Size(), max)
	}
	return os.ReadFile(p)
}

// cleanPath is the canonical form of a source path: "" for the root.
func cleanPath(p string) string {
	c := path.Clean("/" + p)[1:]
	return c
}
