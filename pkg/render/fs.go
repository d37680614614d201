package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// maxSymlinks bounds the links followed while resolving one path, as the
// kernel's ELOOP limit does.
const maxSymlinks = 40

var (
	errReadOnly = errors.New("the render filesystem is read-only")
	errLoop     = errors.New("too many levels of symbolic links")
)

// confinedFS is the filesystem krusty and the chart loader read through. It
// confines every access to the repository: paths are cleaned and must stay
// under the root, symlinks are resolved component by component by resolve
// (so an escape is reported as such, naming the link) and the resolved,
// symlink-free path is then opened through an os.Root, which refuses any
// escape even if the tree changes underneath. Reads are size-limited and
// scanned for YAML alias bombs, and fail once ctx is done.
//
// Virtual files (overlay) let a helm unit's kustomization list the chart
// output without writing it to disk.
//
// The first security or limit violation is remembered: krusty sometimes
// swallows a read error and tries another interpretation of a path, and the
// render must fail with the real cause regardless.
type confinedFS struct {
	ctx     context.Context
	rootAbs string // absolute, symlink-free, OS separators
	root    *os.Root
	maxFile int64
	overlay map[string][]byte // slash-separated repo-relative path → content

	// decryptor decrypts SOPS documents; nil redacts them (sops.go).
	decryptor Decryptor

	mu        sync.Mutex
	resolved  map[string]string
	violation error
	sopsDone  map[string][]byte // SOPS file → what reads of it return
	sopsFiles []string
}

var _ filesys.FileSystem = (*confinedFS)(nil)

func openConfined(ctx context.Context, repoRoot string, maxFile int64) (*confinedFS, error) {
	abs, err := filepath.Abs(repoRoot)
	if err != nil {
		return nil, fmt.Errorf("repository root: %w", err)
	}
	// The root itself may live behind a symlink (/tmp on some systems);
	// only what is below it is confined.
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("repository root: %w", err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("repository root: %w", err)
	}
	return &confinedFS{
		ctx:      ctx,
		rootAbs:  abs,
		root:     root,
		maxFile:  maxFile,
		overlay:  map[string][]byte{},
		resolved: map[string]string{},
		sopsDone: map[string][]byte{},
	}, nil
}

func (f *confinedFS) Close() error { return f.root.Close() }

// abs is the OS path of a repo-relative path, as krusty expects to see it.
func (f *confinedFS) abs(rel string) string {
	if rel == "." {
		return f.rootAbs
	}
	return filepath.Join(f.rootAbs, filepath.FromSlash(rel))
}

// relOf maps a path krusty hands us (absolute, or relative to the root) to
// a clean slash-separated repo-relative path, or ErrPathEscape.
func (f *confinedFS) relOf(p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(f.rootAbs, p)
	} else {
		p = filepath.Clean(p)
	}
	if p == f.rootAbs {
		return ".", nil
	}
	if strings.HasPrefix(p, f.rootAbs+string(filepath.Separator)) {
		return filepath.ToSlash(p[len(f.rootAbs)+1:]), nil
	}
	shown, err := filepath.Rel(f.rootAbs, p)
	if err != nil {
		shown = p
	}
	return "", errFile(filepath.ToSlash(shown), ErrPathEscape, "")
}

// checkRel validates a repo-relative path written by a person or the
// compiler (slash-separated): it must be relative and stay inside.
func checkRel(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("empty path")
	}
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return "", errFile(p, ErrPathEscape, "absolute paths are not allowed")
	}
	c := path.Clean(filepath.ToSlash(p))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errFile(p, ErrPathEscape, "")
	}
	return c, nil
}

// resolve returns the symlink-free repo-relative path that rel names,
// following symlinks only while they stay inside the repository. Results
// are memoized per directory prefix, so a render costs one lstat per
// distinct path component.
func (f *confinedFS) resolve(rel string) (string, error) {
	return f.resolveHops(rel, 0)
}

func (f *confinedFS) resolveHops(rel string, hops int) (string, error) {
	if rel == "." || rel == "" {
		return ".", nil
	}
	f.mu.Lock()
	real, ok := f.resolved[rel]
	f.mu.Unlock()
	if ok {
		return real, nil
	}
	realParent, err := f.resolveHops(path.Dir(rel), hops)
	if err != nil {
		return "", err
	}
	cand := path.Join(realParent, path.Base(rel))
	fi, err := f.root.Lstat(cand)
	if err != nil {
		return "", relPathError(err, rel)
	}
	real = cand
	if fi.Mode()&fs.ModeSymlink != 0 {
		if hops >= maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: rel, Err: errLoop}
		}
		target, err := f.root.Readlink(cand)
		if err != nil {
			return "", relPathError(err, rel)
		}
		var next string
		if filepath.IsAbs(target) {
			t := filepath.Clean(target)
			switch {
			case t == f.rootAbs:
				next = "."
			case strings.HasPrefix(t, f.rootAbs+string(filepath.Separator)):
				next = filepath.ToSlash(t[len(f.rootAbs)+1:])
			default:
				return "", errFile(rel, ErrSymlinkEscape, "-> "+target)
			}
		} else {
			// realParent has no symlinks, so ".." in the target can be
			// applied lexically.
			next = path.Join(realParent, filepath.ToSlash(target))
			if next == ".." || strings.HasPrefix(next, "../") {
				return "", errFile(rel, ErrSymlinkEscape, "-> "+target)
			}
		}
		real, err = f.resolveHops(next, hops+1)
		if err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	f.resolved[rel] = real
	f.mu.Unlock()
	return real, nil
}

// relPathError rewrites an os error so it names the repo-relative path.
func relPathError(err error, rel string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: rel, Err: pe.Err}
	}
	return err
}

// isViolation says whether err is one the render must fail with even if
// krusty recovered from it.
func isViolation(err error) bool {
	for _, c := range []error{ErrPathEscape, ErrSymlinkEscape, ErrTooLarge, ErrYAMLBomb, ErrTimeout, ErrDecrypt} {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

func (f *confinedFS) note(err error) error {
	if err != nil && isViolation(err) {
		f.mu.Lock()
		if f.violation == nil {
			f.violation = err
		}
		f.mu.Unlock()
	}
	return err
}

// Violation is the first security or limit violation any access hit.
func (f *confinedFS) Violation() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.violation
}

func (f *confinedFS) ctxErr() error {
	if err := f.ctx.Err(); err != nil {
		return f.note(timeoutError(err))
	}
	return nil
}

func timeoutError(cause error) error {
	if errors.Is(cause, context.Canceled) {
		return fmt.Errorf("render canceled: %w", cause)
	}
	return &classError{class: ErrTimeout, cause: cause}
}

// readRel reads the file at a checked repo-relative path.
func (f *confinedFS) readRel(rel string) ([]byte, error) {
	if err := f.ctxErr(); err != nil {
		return nil, err
	}
	if data, ok := f.overlay[rel]; ok {
		if err := ScanYAML(data); err != nil {
			return nil, f.note(&fileError{file: rel, err: err})
		}
		return data, nil
	}
	real, err := f.resolve(rel)
	if err != nil {
		return nil, f.note(err)
	}
	file, err := f.root.Open(real)
	if err != nil {
		return nil, f.note(relPathError(err, rel))
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return nil, relPathError(err, rel)
	}
	if fi.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: errors.New("is a directory")}
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: errors.New("not a regular file")}
	}
	if fi.Size() > f.maxFile {
		return nil, f.note(errFile(rel, ErrTooLarge, fmt.Sprintf("file is %d bytes, the limit is %d", fi.Size(), f.maxFile)))
	}
	data, err := io.ReadAll(io.LimitReader(file, f.maxFile+1))
	if err != nil {
		return nil, relPathError(err, rel)
	}
	if int64(len(data)) > f.maxFile { // grew while we read it
		return nil, f.note(errFile(rel, ErrTooLarge, fmt.Sprintf("file exceeds the limit of %d bytes", f.maxFile)))
	}
	if err := ScanYAML(data); err != nil {
		return nil, f.note(&fileError{file: rel, err: err})
	}
	return f.sopsContent(rel, data)
}

// statRel resolves rel and stats it; overlay files report as regular files.
func (f *confinedFS) statRel(rel string) (string, fs.FileInfo, error) {
	if data, ok := f.overlay[rel]; ok {
		return rel, memInfo{name: path.Base(rel), size: int64(len(data))}, nil
	}
	real, err := f.resolve(rel)
	if err != nil {
		return "", nil, err
	}
	fi, err := f.root.Lstat(real)
	if err != nil {
		return "", nil, relPathError(err, rel)
	}
	return real, fi, nil
}

// readDirRel lists a directory (sorted), including overlay files in it.
func (f *confinedFS) readDirRel(rel string) ([]string, error) {
	real, err := f.resolve(rel)
	if err != nil {
		return nil, f.note(err)
	}
	dir, err := f.root.Open(real)
	if err != nil {
		return nil, relPathError(err, rel)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, relPathError(err, rel)
	}
	for o := range f.overlay {
		if path.Dir(o) == rel && !slices.Contains(names, path.Base(o)) {
			names = append(names, path.Base(o))
		}
	}
	slices.Sort(names)
	return names, nil
}

// The filesys.FileSystem methods krusty calls. Paths are OS paths.

func (f *confinedFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	if err := f.ctxErr(); err != nil {
		return "", "", err
	}
	rel, err := f.relOf(p)
	if err != nil {
		return "", "", f.note(err)
	}
	if _, ok := f.overlay[rel]; ok {
		realDir, err := f.resolve(path.Dir(rel))
		if err != nil {
			return "", "", f.note(err)
		}
		return filesys.ConfirmedDir(f.abs(realDir)), path.Base(rel), nil
	}
	real, fi, err := f.statRel(rel)
	if err != nil {
		return "", "", f.note(err)
	}
	if fi.IsDir() {
		return filesys.ConfirmedDir(f.abs(real)), "", nil
	}
	return filesys.ConfirmedDir(f.abs(path.Dir(real))), path.Base(real), nil
}

func (f *confinedFS) ReadFile(p string) ([]byte, error) {
	rel, err := f.relOf(p)
	if err != nil {
		return nil, f.note(err)
	}
	return f.readRel(rel)
}

func (f *confinedFS) Open(p string) (filesys.File, error) {
	data, err := f.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return &memFile{Reader: bytes.NewReader(data), info: memInfo{name: filepath.Base(p), size: int64(len(data))}}, nil
}

func (f *confinedFS) Exists(p string) bool {
	rel, err := f.relOf(p)
	if err != nil {
		return false
	}
	_, _, err = f.statRel(rel)
	return err == nil
}

func (f *confinedFS) IsDir(p string) bool {
	rel, err := f.relOf(p)
	if err != nil {
		return false
	}
	_, fi, err := f.statRel(rel)
	return err == nil && fi.IsDir()
}

func (f *confinedFS) ReadDir(p string) ([]string, error) {
	rel, err := f.relOf(p)
	if err != nil {
		return nil, f.note(err)
	}
	return f.readDirRel(rel)
}

// Glob supports wildcards in the last path element only, which is all
// kustomize uses.
func (f *confinedFS) Glob(pattern string) ([]string, error) {
	dir, pat := filepath.Split(pattern)
	if dir == "" {
		dir = "."
	}
	names, err := f.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, n := range names {
		ok, err := filepath.Match(pat, n)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out, nil
}

// Walk walks like filepath.Walk (lexical order, symlinks not followed).
func (f *confinedFS) Walk(p string, fn filepath.WalkFunc) error {
	rel, err := f.relOf(p)
	if err != nil {
		return fn(p, nil, f.note(err))
	}
	real, fi, err := f.statRel(rel)
	if err != nil {
		return fn(p, nil, f.note(err))
	}
	err = f.walk(p, real, fi, fn)
	if errors.Is(err, filepath.SkipDir) || errors.Is(err, filepath.SkipAll) {
		return nil
	}
	return err
}

func (f *confinedFS) walk(osPath, real string, fi fs.FileInfo, fn filepath.WalkFunc) error {
	if err := f.ctxErr(); err != nil {
		return err
	}
	if err := fn(osPath, fi, nil); err != nil || !fi.IsDir() {
		if errors.Is(err, filepath.SkipDir) && !fi.IsDir() {
			return nil
		}
		return err
	}
	names, err := f.readDirRel(real)
	if err != nil {
		return fn(osPath, fi, err)
	}
	for _, n := range names {
		childReal := path.Join(real, n)
		cfi, err := f.root.Lstat(childReal)
		if err != nil {
			if err := fn(filepath.Join(osPath, n), nil, err); err != nil && !errors.Is(err, filepath.SkipDir) {
				return err
			}
			continue
		}
		if err := f.walk(filepath.Join(osPath, n), childReal, cfi, fn); err != nil {
			if errors.Is(err, filepath.SkipDir) {
				continue
			}
			return err
		}
	}
	return nil
}

func (f *confinedFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (f *confinedFS) Mkdir(string) error                  { return errReadOnly }
func (f *confinedFS) MkdirAll(string) error               { return errReadOnly }
func (f *confinedFS) RemoveAll(string) error              { return errReadOnly }
func (f *confinedFS) WriteFile(string, []byte) error      { return errReadOnly }

// memFile is a read-only in-memory filesys.File.
type memFile struct {
	*bytes.Reader
	info memInfo
}

func (m *memFile) Write([]byte) (int, error)  { return 0, errReadOnly }
func (m *memFile) Close() error               { return nil }
func (m *memFile) Stat() (os.FileInfo, error) { return m.info, nil }

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
