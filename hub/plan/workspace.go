package plan

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"sort"
	"strings"
	"sync"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// side is one revision, materialized and compiled.
type side struct {
	name   string // "base" or "head"
	commit string // empty for the working tree
	root   string // the fleet repo root of the copy
	// rendered are the committed files under rendered/, fleet-root
	// relative, with their blob hashes (commits only).
	rendered map[string]string
	repo     *fleet.Repo
	// committed reads the side's committed slices (where GlobalJobs are
	// placed already).
	committed fleetrender.SliceReader
	// rollout is where held units are read (rollout.go).
	rollout fleetrender.CommittedTree
	out     *fleetrender.Output
	byName  map[string]*fleetrender.ClusterOutput
	// warnings are the status documents the compile could not use.
	warnings []string
}

// committedSlices reads the commit's slices from rendered/ as committed,
// exporting its slice.yaml files into dir on first use (only a repo with
// BestFit GlobalJobs asks).
func (s *side) committedSlices(ctx context.Context, top, prefix, dir string) fleetrender.SliceReader {
	var once sync.Once
	var exportErr error
	root := filepath.Join(dir, prefix)
	return func(cluster string) (*slice.Slice, error) {
		once.Do(func() {
			var paths []string
			for p := range s.rendered {
				if path.Base(p) == slice.FileName {
					paths = append(paths, path.Join(filepath.ToSlash(prefix), p))
				}
			}
			sort.Strings(paths)
			exportErr = gitrepo.ExportTreePaths(ctx, top, s.commit, dir, paths)
		})
		if exportErr != nil {
			return nil, exportErr
		}
		return slice.Read(root, cluster)
	}
}

// joinWarnings lists a's warnings, then b's that a does not have.
func joinWarnings(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range append(append([]string(nil), a...), b...) {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// gitTop finds the work tree containing dir and dir's path inside it.
func gitTop(dir string) (top, prefix string, err error) {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			rel, err := filepath.Rel(d, dir)
			if err != nil {
				return "", "", err
			}
			if rel == "." {
				rel = ""
			}
			return d, rel, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", fmt.Errorf("plan: %s: %w", dir, ErrNotGitRepo)
		}
		d = parent
	}
}

// copyInputs copies the fleet repo's working tree into dst without .git
// directories and the top-level rendered/: regular files with their
// executable bit, symlinks as they are.
func copyInputs(ctx context.Context, src, dst string) error {
	rendered := filepath.Join(src, slice.RenderedDir)
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if (d.Name() == ".git" && p != src) || p == rendered {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return copyFile(p, target, info.Mode().Perm()&0o755|0o644)
		}
		return nil // sockets, devices: nothing a render reads
	})
}

// export writes the commit's fleet repo inputs (everything under prefix
// but rendered/) into dest and lists the committed rendered/ files.
func (s *side) export(ctx context.Context, top, prefix, dest string) error {
	slashPrefix := filepath.ToSlash(prefix)
	files, err := gitrepo.ListTree(ctx, top, s.commit, slashPrefix)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.rendered = map[string]string{}
	include := map[string]bool{}
	for _, f := range files {
		rel := f.Path
		if slashPrefix != "" {
			rel = strings.TrimPrefix(rel, slashPrefix+"/")
		}
		first, _, _ := strings.Cut(rel, "/")
		if first == slice.RenderedDir {
			s.rendered[rel] = f.Hash
			continue
		}
		include[path.Join(slashPrefix, first)] = true
	}
	if err := gitrepo.ExportTreePaths(ctx, top, s.commit, dest, sortedKeys(include)); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if len(include) == 0 && len(s.rendered) > 0 {
		// Only rendered/: the fleet repo root exists, without inputs.
		return os.MkdirAll(s.root, 0o755)
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (s *side) load(ctx context.Context) error {
	repo, err := fleet.Load(ctx, s.root)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.repo = repo
	return nil
}

// compile compiles the selected clusters this side has (all when selected
// is nil).
func (s *side) compile(ctx context.Context, selected map[string]bool, opts fleetrender.PipelineOptions) error {
	opts.Committed = s.committed
	opts.Rollout = &fleetrender.RolloutOptions{Committed: s.rollout}
	opts.Warn = func(msg string) { s.warnings = append(s.warnings, msg) }
	if selected != nil {
		for _, c := range s.repo.Clusters {
			if selected[c.Metadata.Name] {
				opts.Clusters = append(opts.Clusters, c.Metadata.Name)
			}
		}
		if len(opts.Clusters) == 0 {
			s.out = &fleetrender.Output{Scope: []string{}}
			s.byName = map[string]*fleetrender.ClusterOutput{}
			return nil
		}
	}
	out, err := fleetrender.Pipeline(ctx, s.repo, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.out = out
	if err := s.writeShared(); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	s.byName = make(map[string]*fleetrender.ClusterOutput, len(out.Clusters))
	for _, co := range out.Clusters {
		s.byName[co.Slice.Cluster] = co
	}
	return nil
}

// staleness compares head's committed rendered/ with the fresh compile:
// agents apply what is committed, so a stale rendered/ makes the plan
// (which shows the fresh render) wrong until `flotilla render` runs. A
// commit's files are compared by blob hash, the working tree's on disk.
func staleness(ctx context.Context, head *side, workTree string) (string, error) {
	var differ []string
	if head.commit == "" {
		ch, err := fleetrender.Write(ctx, workTree, head.out, fleetrender.WriteOptions{Check: true})
		if err != nil {
			return "", fmt.Errorf("head: check rendered/: %w", err)
		}
		differ = ch.All()
	} else {
		differ = staleFiles(head.out, head.rendered)
	}
	if len(differ) == 0 {
		return "", nil
	}
	return fmt.Sprintf("rendered/ at head is stale: %d files differ from a fresh render (first: %s). Agents apply the committed rendered/; this plan shows the fresh render. Run `flotilla render` and commit the result.",
		len(differ), differ[0]), nil
}

// staleFiles lists the generated files whose committed blob differs from
// the compile's (missing, changed or no longer generated), within the
// compile's scope, sorted.
func staleFiles(out *fleetrender.Output, committed map[string]string) []string {
	inScope := func(p string) bool { return true }
	if out.Scope != nil {
		dirs := make([]string, len(out.Scope))
		for i, c := range out.Scope {
			dirs[i] = slice.ClusterDir(c) + "/"
		}
		inScope = func(p string) bool {
			for _, d := range dirs {
				if strings.HasPrefix(p, d) {
					return true
				}
			}
			return false
		}
	}
	var differ []string
	generated := map[string]bool{}
	files := [][]fleetrender.File{out.Shared}
	for _, co := range out.Clusters {
		files = append(files, co.Files)
	}
	for _, fs := range files {
		for _, f := range fs {
			generated[f.Path] = true
			if committed[f.Path] != gitrepo.BlobHash(f.Data) {
				differ = append(differ, f.Path)
			}
		}
	}
	for p := range committed {
		if !generated[p] && inScope(p) {
			differ = append(differ, p)
		}
	}
	sort.Strings(differ)
	return differ
}
