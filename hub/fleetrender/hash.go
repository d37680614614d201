package fleetrender

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// ErrOutsideRepo reports a source, chart or kustomize reference that leaves
// the repo root. It is the slice contract's, which hashes units.
var ErrOutsideRepo = slice.ErrOutsideRepo

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
// When dir has no kustomization file, the nested kustomizations Flux's
// generated one would list are followed.
// Remote references are skipped: they cannot be hashed and pkg/render
// refuses them. A reference that leaves the repo is an error naming the
// kustomization file.
func kustomizeInputs(root, dir string) ([]string, error) {
	top := dir
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
			if dir != top {
				return nil // kustomize fails on it when it builds
			}
			// pkg/render generates Flux's kustomization here: dir is hashed
			// whole, and what its nested kustomizations reference outside
			// it is an input too.
			return nestedKustomizations(root, dir, visit)
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

// nestedKustomizations calls visit for each directory below dir that
// Flux's generator lists as a resource: the shallowest ones holding a
// kustomization file, in lexical order, symlinked directories not
// followed.
func nestedKustomizations(root, dir string, visit func(string) error) error {
	base := filepath.Join(root, filepath.FromSlash(dir))
	return filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == base || !e.IsDir() {
			return nil
		}
		for _, name := range kustomizationFiles {
			if fi, err := os.Stat(filepath.Join(p, name)); err == nil && !fi.IsDir() {
				rel, err := filepath.Rel(root, p)
				if err != nil {
					return err
				}
				if err := visit(filepath.ToSlash(rel)); err != nil {
					return err
				}
				return fs.SkipDir
			}
		}
		return nil
	})
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
