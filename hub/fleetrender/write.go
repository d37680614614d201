package fleetrender

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// ErrUnsafePath reports a generated path outside rendered/ or not clean.
var ErrUnsafePath = errors.New("unsafe generated path")

// WriteOptions tune Write.
type WriteOptions struct {
	// Check reports what would change without touching the tree.
	Check bool
	// Progress, when set, is called as files are compared and written.
	Progress func(done, total int)
}

// Changes lists repo-relative paths, each sorted.
type Changes struct {
	Added   []string `json:"added"`
	Changed []string `json:"changed"`
	Removed []string `json:"removed"`
}

// Empty reports whether nothing differs.
func (c Changes) Empty() bool {
	return len(c.Added) == 0 && len(c.Changed) == 0 && len(c.Removed) == 0
}

// All returns every path of the changes, sorted.
func (c Changes) All() []string {
	all := make([]string, 0, len(c.Added)+len(c.Changed)+len(c.Removed))
	all = append(all, c.Added...)
	all = append(all, c.Changed...)
	all = append(all, c.Removed...)
	sort.Strings(all)
	return all
}

// Write makes rendered/ under root hold exactly out: files whose bytes
// differ are replaced (each written to a temporary file and renamed, so a
// reader never sees a partial file; a new cluster or unit directory is
// built whole under a temporary name and renamed into place), missing ones
// added, and files and directories no longer generated removed. Identical files are not touched,
// so their modification times and the Git diff stay quiet. When out.Scope
// is set, only those clusters' directories are considered.
//
// Every path is checked before anything is written.
func Write(ctx context.Context, root string, out *Output, opts WriteOptions) (Changes, error) {
	want := make(map[string][]byte)
	files := make([][]File, 0, len(out.Clusters)+1)
	for _, co := range out.Clusters {
		files = append(files, co.Files)
	}
	for _, fs := range append(files, out.Shared) {
		for _, f := range fs {
			if err := checkGeneratedPath(f.Path); err != nil {
				return Changes{}, err
			}
			if _, dup := want[f.Path]; dup {
				return Changes{}, fmt.Errorf("write: %s generated twice: %w", f.Path, ErrUnsafePath)
			}
			want[f.Path] = f.Data
		}
	}
	var scopes []string
	if out.Scope == nil {
		scopes = []string{slice.RenderedDir}
	} else {
		for _, name := range out.Scope {
			scopes = append(scopes, slice.ClusterDir(name))
		}
	}
	existing, dirs, err := listTree(ctx, root, scopes)
	if err != nil {
		return Changes{}, err
	}
	if out.Scope != nil {
		// Shared files lie outside the scope's directories.
		for _, f := range out.Shared {
			if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f.Path))); err == nil {
				existing[f.Path] = true
			}
		}
	}
	var ch Changes
	var compare []string
	for p := range want {
		if existing[p] {
			compare = append(compare, p)
		} else {
			ch.Added = append(ch.Added, p)
		}
	}
	for p := range existing {
		if _, ok := want[p]; !ok {
			ch.Removed = append(ch.Removed, p)
		}
	}
	ch.Changed, err = differing(ctx, root, compare, want)
	if err != nil {
		return Changes{}, err
	}
	sort.Strings(ch.Added)
	sort.Strings(ch.Changed)
	sort.Strings(ch.Removed)
	if opts.Check || ch.Empty() {
		return ch, nil
	}
	toWrite := append(append([]string(nil), ch.Added...), ch.Changed...)
	existingDirs := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		existingDirs[d] = true
	}
	if _, err := os.Stat(filepath.Join(root, slice.RenderedDir)); err == nil {
		existingDirs[slice.RenderedDir] = true
	}
	if err := writeFiles(ctx, root, toWrite, want, existingDirs, opts.Progress); err != nil {
		return ch, err
	}
	for _, p := range ch.Removed {
		if err := os.Remove(filepath.Join(root, filepath.FromSlash(p))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return ch, fmt.Errorf("remove stale %s: %w", p, err)
		}
	}
	removeEmptyDirs(root, dirs)
	return ch, nil
}

// checkGeneratedPath refuses anything that is not a clean path below
// rendered/.
func checkGeneratedPath(p string) error {
	if p == "" || path.Clean(p) != p || path.IsAbs(p) || !strings.HasPrefix(p, slice.RenderedDir+"/") || strings.Contains(p, "\\") {
		return fmt.Errorf("write %q: %w", p, ErrUnsafePath)
	}
	return nil
}

// listTree returns every non-directory entry under the scope directories
// and every directory, deepest first. It reads names only (no stat per
// file): at fleet scale rendered/ holds hundreds of thousands of files.
func listTree(ctx context.Context, root string, scopes []string) (map[string]bool, []string, error) {
	files := map[string]bool{}
	var dirs []string
	var mu sync.Mutex
	// Walk the top level of each scope in parallel; the walk is
	// syscall-bound.
	var tops []string
	for _, s := range scopes {
		entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(s)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("list %s: %w", s, err)
		}
		dirs = append(dirs, s)
		for _, e := range entries {
			p := s + "/" + e.Name()
			if e.IsDir() {
				tops = append(tops, p)
			} else {
				files[p] = true
			}
		}
	}
	err := parallel(ctx, len(tops), func(i int) error {
		var localFiles, localDirs []string
		base := filepath.Join(root, filepath.FromSlash(tops[i]))
		err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if e.IsDir() {
				localDirs = append(localDirs, rel)
			} else {
				localFiles = append(localFiles, rel)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("list %s: %w", tops[i], err)
		}
		mu.Lock()
		for _, f := range localFiles {
			files[f] = true
		}
		dirs = append(dirs, localDirs...)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// Deepest first, so children are removed before their parents.
	sort.Slice(dirs, func(i, j int) bool {
		di, dj := strings.Count(dirs[i], "/"), strings.Count(dirs[j], "/")
		if di != dj {
			return di > dj
		}
		return dirs[i] < dirs[j]
	})
	return files, dirs, nil
}

// differing returns the paths whose file content differs from want (a
// symlink or special file in place of a generated file differs too).
func differing(ctx context.Context, root string, paths []string, want map[string][]byte) ([]string, error) {
	diff := make([]bool, len(paths))
	err := parallel(ctx, len(paths), func(i int) error {
		same, err := sameContent(filepath.Join(root, filepath.FromSlash(paths[i])), want[paths[i]])
		if err != nil {
			return fmt.Errorf("read %s: %w", paths[i], err)
		}
		diff[i] = !same
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for i, d := range diff {
		if d {
			out = append(out, paths[i])
		}
	}
	return out, nil
}

// writeFiles writes each path atomically: a temporary file in the same
// directory, then a rename over the old one.
func writeFiles(ctx context.Context, root string, paths []string, want map[string][]byte, existingDirs map[string]bool, progress func(done, total int)) error {
	abs := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	newDirs := map[string]bool{}
	for _, p := range paths {
		for d := path.Dir(p); d != "." && !newDirs[d] && !existingDirs[d]; d = path.Dir(d) {
			newDirs[d] = true
		}
	}
	// A new cluster or unit directory is built whole under a temporary name
	// and renamed into place: one rename makes all its files appear at
	// once, instead of a temporary file and a rename per file. rendered/
	// and bucket directories are shared, so they are created in place.
	// stagedRoot is the topmost new directory containing dir, at cluster
	// depth or below ("" when dir exists or is shared).
	stagedRoot := func(dir string) string {
		var top string
		for d := dir; d != "." && newDirs[d]; d = path.Dir(d) {
			if strings.Count(d, "/") >= 2 { // rendered/<bucket>/<cluster>[/…]
				top = d
			}
		}
		return top
	}
	groups := map[string][]string{}
	groupDirs := map[string][]string{}
	var single []string
	for _, p := range paths {
		if r := stagedRoot(path.Dir(p)); r != "" {
			groups[r] = append(groups[r], p)
		} else {
			single = append(single, p)
		}
	}
	for _, d := range sortedKeys(newDirs) {
		if strings.Count(d, "/") < 2 {
			if err := mkdir(abs(d)); err != nil {
				return err
			}
		} else if r := stagedRoot(d); r != "" {
			groupDirs[r] = append(groupDirs[r], d) // sorted: parents first
		}
	}
	var done int
	var mu sync.Mutex
	report := func(n int) {
		if progress != nil {
			mu.Lock()
			done += n
			progress(done, len(paths))
			mu.Unlock()
		}
	}
	roots := sortedKeys(groups)
	err := parallel(ctx, len(roots), func(i int) error {
		r := roots[i]
		tmp := path.Join(path.Dir(r), tempPrefix+path.Base(r))
		if err := os.RemoveAll(abs(tmp)); err != nil {
			return fmt.Errorf("write %s: %w", r, err)
		}
		files := groups[r]
		for _, d := range groupDirs[r] {
			if err := mkdir(abs(tmp + strings.TrimPrefix(d, r))); err != nil {
				return err
			}
		}
		for _, f := range files {
			if err := writeNew(abs(tmp+strings.TrimPrefix(f, r)), want[f]); err != nil {
				return err
			}
		}
		if err := os.Rename(abs(tmp), abs(r)); err != nil {
			return fmt.Errorf("write %s: %w", r, err)
		}
		report(len(files))
		return nil
	})
	if err != nil {
		return err
	}
	return parallel(ctx, len(single), func(i int) error {
		if err := writeAtomic(abs(single[i]), want[single[i]]); err != nil {
			return err
		}
		report(1)
		return nil
	})
}

// tempPrefix marks temporary files. One writer per rendered/ tree, so a
// fixed temporary name suffices; a leftover from a crash is replaced by the
// next write of that file or removed as stale.
const tempPrefix = ".flotilla-tmp-"

// removeEmptyDirs removes directories (deepest first) left empty by the
// removal of stale files; rendered/ itself stays.
func removeEmptyDirs(root string, dirs []string) {
	for _, d := range dirs {
		if d == slice.RenderedDir {
			continue
		}
		// Remove fails on a non-empty directory, which is what we want.
		_ = os.Remove(filepath.Join(root, filepath.FromSlash(d)))
	}
}

// parallel runs fn for 0..n-1 on a few workers (file I/O bound, so more
// than the CPU count) and returns the first error; ctx stops it early.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	if n == 0 {
		return ctx.Err()
	}
	workers := 4 * runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	stop := make(chan struct{})
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					once.Do(func() { first = err; close(stop) })
				}
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case <-stop:
			break feed
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
