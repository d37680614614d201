package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// ErrOutsideRepo reports a source, chart or kustomize reference that leaves
// the repo root.
var ErrOutsideRepo = errors.New("path leaves the repo")

// treeHasher hashes files and directory trees of the repo, caching every
// directory's digest so that thousands of units sharing a source hash it
// once. Paths are slash-separated and relative to the repo root.
type treeHasher struct {
	root string
	mu   sync.Mutex
	dirs map[string]string
}

func newTreeHasher(root string) *treeHasher {
	return &treeHasher{root: root, dirs: map[string]string{}}
}

// hashPath returns the digest of a file or directory tree: for a directory,
// over each entry's name, type and digest, sorted by name, so renames,
// mode changes (executable bit) and content changes all change it.
func (h *treeHasher) hashPath(rel string) (string, error) {
	fi, err := os.Lstat(filepath.Join(h.root, filepath.FromSlash(rel)))
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", rel, err)
	}
	return h.hashEntry(rel, fi)
}

func (h *treeHasher) hashEntry(rel string, fi fs.FileInfo) (string, error) {
	switch {
	case fi.IsDir():
		return h.hashDir(rel)
	case fi.Mode()&fs.ModeSymlink != 0:
		// A link is hashed by its target text; a link leaving the repo would
		// make the render read outside it, so it is refused.
		target, err := os.Readlink(filepath.Join(h.root, filepath.FromSlash(rel)))
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", rel, err)
		}
		if filepath.IsAbs(target) || !inRepo(path.Join(path.Dir(rel), filepath.ToSlash(target))) {
			return "", fmt.Errorf("symlink %s -> %s: %w", rel, target, ErrOutsideRepo)
		}
		return digestString("l " + filepath.ToSlash(target)), nil
	case fi.Mode().IsRegular():
		return h.hashFile(rel, fi.Mode()&0o111 != 0)
	default:
		return "", fmt.Errorf("hash %s: not a regular file, directory or symlink", rel)
	}
}

func (h *treeHasher) hashFile(rel string, exec bool) (string, error) {
	f, err := os.Open(filepath.Join(h.root, filepath.FromSlash(rel)))
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", rel, err)
	}
	defer f.Close()
	d := sha256.New()
	if exec {
		d.Write([]byte("x "))
	} else {
		d.Write([]byte("f "))
	}
	if _, err := io.Copy(d, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", rel, err)
	}
	return hex.EncodeToString(d.Sum(nil)), nil
}

func (h *treeHasher) hashDir(rel string) (string, error) {
	return h.hashDirExcept(rel, "")
}

// hashDirExcept hashes a directory tree leaving out the top-level entry
// named skip (when not empty).
func (h *treeHasher) hashDirExcept(rel, skip string) (string, error) {
	key := rel
	if skip != "" {
		key = rel + "\x00" + skip
	}
	h.mu.Lock()
	sum, ok := h.dirs[key]
	h.mu.Unlock()
	if ok {
		return sum, nil
	}
	entries, err := os.ReadDir(filepath.Join(h.root, filepath.FromSlash(rel)))
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", rel, err)
	}
	d := sha256.New()
	d.Write([]byte("d\n"))
	for _, e := range entries { // ReadDir sorts by name
		if e.Name() == skip {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", path.Join(rel, e.Name()), err)
		}
		child, err := h.hashEntry(path.Join(rel, e.Name()), fi)
		if err != nil {
			return "", err
		}
		writeField(d, e.Name())
		writeField(d, child)
	}
	sum = hex.EncodeToString(d.Sum(nil))
	h.mu.Lock()
	h.dirs[key] = sum
	h.mu.Unlock()
	return sum, nil
}

// writeField writes a length-prefixed string so that concatenations cannot
// collide.
func writeField(w hash.Hash, s string) {
	fmt.Fprintf(w, "%d:%s\n", len(s), s)
}

func digestString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// inRepo reports whether a cleaned, slash-separated, repo-relative path stays
// inside the repo.
func inRepo(rel string) bool {
	rel = path.Clean(rel)
	return rel != ".." && !strings.HasPrefix(rel, "../") && !path.IsAbs(rel)
}

// within reports whether rel is dir or below it.
func within(rel, dir string) bool {
	return rel == dir || dir == "." || strings.HasPrefix(rel, dir+"/")
}

// kustomizationFiles are the names kustomize looks for, in its order.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// kustomizeInputs returns every local directory and file a kustomization
// directory reads, transitively (resources, bases, components, patches,
// generators' files, …), as repo-relative paths, including dir itself.
// Remote references are skipped: they cannot be hashed and pkg/render
// refuses them. A reference that leaves the repo is an error naming the
// kustomization file.
func kustomizeInputs(root, dir string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	var visit func(dir string) error
	visit = func(dir string) error {
		if seen[dir] {
			return nil
		}
		seen[dir] = true
		out = append(out, dir)
		var kfile string
		var data []byte
		for _, name := range kustomizationFiles {
			b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dir), name))
			if err == nil {
				kfile, data = path.Join(dir, name), b
				break
			}
		}
		if kfile == "" {
			return nil
		}
		var k map[string]any
		if err := yaml.Unmarshal(data, &k); err != nil {
			return fmt.Errorf("%s: %w", kfile, err)
		}
		for _, ref := range kustomizeRefs(k) {
			if isRemoteRef(ref) {
				continue
			}
			if path.IsAbs(ref) {
				return fmt.Errorf("%s: reference %q: %w", kfile, ref, ErrOutsideRepo)
			}
			p := path.Join(dir, ref)
			if !inRepo(p) {
				return fmt.Errorf("%s: reference %q: %w", kfile, ref, ErrOutsideRepo)
			}
			fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
			if err != nil {
				continue // kustomize reports a missing file when it builds
			}
			if fi.IsDir() {
				if err := visit(p); err != nil {
					return err
				}
			} else if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
		return nil
	}
	if err := visit(dir); err != nil {
		return nil, err
	}
	return out, nil
}

// kustomizeRefs lists the path-like strings of a kustomization that may
// name local files or directories.
func kustomizeRefs(k map[string]any) []string {
	var refs []string
	addList := func(v any) {
		if l, ok := v.([]any); ok {
			for _, e := range l {
				if s, ok := e.(string); ok && !strings.Contains(s, "\n") {
					refs = append(refs, s)
				}
			}
		}
	}
	addPathField := func(v any, field string) {
		if l, ok := v.([]any); ok {
			for _, e := range l {
				if m, ok := e.(map[string]any); ok {
					if s, ok := m[field].(string); ok {
						refs = append(refs, s)
					}
				}
			}
		}
	}
	for _, f := range []string{"resources", "bases", "components", "crds", "configurations",
		"patchesStrategicMerge", "generators", "transformers", "validators"} {
		addList(k[f])
	}
	for _, f := range []string{"patches", "patchesJson6902", "replacements"} {
		addPathField(k[f], "path")
	}
	if m, ok := k["openapi"].(map[string]any); ok {
		if s, ok := m["path"].(string); ok {
			refs = append(refs, s)
		}
	}
	for _, f := range []string{"configMapGenerator", "secretGenerator", "helmCharts"} {
		l, _ := k[f].([]any)
		for _, e := range l {
			m, _ := e.(map[string]any)
			for _, key := range []string{"files", "envs"} {
				if fl, ok := m[key].([]any); ok {
					for _, fe := range fl {
						if s, ok := fe.(string); ok {
							// files entries may be "key=path".
							if _, after, found := strings.Cut(s, "="); found {
								s = after
							}
							refs = append(refs, s)
						}
					}
				}
			}
			if s, ok := m["env"].(string); ok {
				refs = append(refs, s)
			}
			if s, ok := m["valuesFile"].(string); ok {
				refs = append(refs, s)
			}
		}
	}
	if m, ok := k["helmGlobals"].(map[string]any); ok {
		if s, ok := m["chartHome"].(string); ok {
			refs = append(refs, s)
		}
	}
	sort.Strings(refs)
	return refs
}

// isRemoteRef reports whether a kustomize reference is a URL or a Git
// remote rather than a local path.
func isRemoteRef(s string) bool {
	return strings.Contains(s, "://") || strings.HasPrefix(s, "git@") ||
		strings.HasPrefix(s, "github.com/") || strings.HasPrefix(s, "gitlab.com/") ||
		strings.HasPrefix(s, "bitbucket.org/") || strings.Contains(s, "?ref=") ||
		strings.Contains(s, ".git//")
}

// minimalRoots sorts paths and drops any that lie inside another, so each
// input is hashed once.
func minimalRoots(paths []string) []string {
	ps := append([]string(nil), paths...)
	sort.Strings(ps)
	var out []string
	for _, p := range ps {
		covered := false
		for _, q := range out {
			if within(p, q) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}
