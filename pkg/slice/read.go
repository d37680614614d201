package slice

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// ErrInvalidSlice reports a slice.yaml that does not follow the contract.
var ErrInvalidSlice = errors.New("invalid slice")

// MaxSliceSize bounds the slice.yaml Read accepts.
const MaxSliceSize = 16 << 20

// Read loads and checks rendered/<bucket>/<cluster>/slice.yaml under root.
func Read(root, cluster string) (*Slice, error) {
	p := SlicePath(cluster)
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(p)))
	if err != nil {
		return nil, fmt.Errorf("read slice: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read slice: %w", err)
	}
	if fi.Size() > MaxSliceSize {
		return nil, fmt.Errorf("read slice %s: %d bytes exceeds %d: %w", p, fi.Size(), MaxSliceSize, ErrInvalidSlice)
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("read slice %s: %w", p, err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("read slice %s: %w", p, err)
	}
	if s.Cluster != cluster {
		return nil, fmt.Errorf("read slice %s: cluster %q, want %q: %w", p, s.Cluster, cluster, ErrInvalidSlice)
	}
	return s, nil
}

// Parse decodes a slice.yaml strictly (unknown or duplicate fields are
// errors) and checks it: known kinds, unit paths where the layout puts
// them, dependencies on earlier units only, well-formed hashes.
func Parse(data []byte) (*Slice, error) {
	var s Slice
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSlice, err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks a slice against the contract.
func (s *Slice) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidSlice, fmt.Sprintf(format, args...))
	}
	if s.APIVersion != APIVersion || s.Kind != Kind {
		return bad("apiVersion/kind %s/%s, want %s/%s", s.APIVersion, s.Kind, APIVersion, Kind)
	}
	if errs := validation.IsDNS1123Subdomain(s.Cluster); len(errs) > 0 {
		return bad("cluster %q: %s", s.Cluster, strings.Join(errs, "; "))
	}
	seen := make(map[string]bool, len(s.Units))
	for i := range s.Units {
		u := &s.Units[i]
		at := fmt.Sprintf("units[%d]", i)
		if errs := validation.IsDNS1123Subdomain(u.Name); len(errs) > 0 {
			return bad("%s.name %q: %s", at, u.Name, strings.Join(errs, "; "))
		}
		if seen[u.Name] {
			return bad("%s.name %q: duplicate unit", at, u.Name)
		}
		switch u.Kind {
		case UnitKustomize, UnitManifests, UnitHelm, UnitVolcano:
		default:
			return bad("%s.kind %q: unknown unit kind", at, u.Kind)
		}
		if want := UnitDir(s.Cluster, u.Name); u.Path != want {
			return bad("%s.path %q: want %q", at, u.Path, want)
		}
		if (u.Kind == UnitHelm) != (u.Helm != nil) {
			return bad("%s.helm: must be set exactly for kind helm", at)
		}
		if h := u.Helm; h != nil {
			if h.Chart == "" || !cleanRepoPath(h.Chart) {
				return bad("%s.helm.chart %q: not a clean path inside the repo", at, h.Chart)
			}
			if h.ReleaseName == "" {
				return bad("%s.helm.releaseName: required", at)
			}
			if h.Values != path.Join(u.Path, ValuesFile) {
				return bad("%s.helm.values %q: want %q", at, h.Values, path.Join(u.Path, ValuesFile))
			}
		}
		for j, d := range u.DependsOn {
			if !seen[d] {
				return bad("%s.dependsOn[%d] %q: not a unit listed before it", at, j, d)
			}
		}
		if u.Timeout.Duration <= 0 {
			return bad("%s.timeout: must be positive", at)
		}
		for j, hc := range u.HealthChecks {
			if hc.APIVersion == "" || hc.Current == "" {
				return bad("%s.healthChecks[%d]: apiVersion and current are required", at, j)
			}
		}
		if !validHash(u.Hash) {
			return bad("%s.hash %q: want sha256:<64 hex digits>", at, u.Hash)
		}
		for j, in := range u.Inputs {
			if in.Path == "" || !cleanRepoPath(in.Path) || strings.Contains(in.Except, "/") {
				return bad("%s.inputs[%d] %q: not a clean path inside the repo", at, j, in.Path)
			}
		}
		seen[u.Name] = true
	}
	return nil
}

func cleanRepoPath(p string) bool {
	return path.Clean(p) == p && inRepo(p) && !strings.Contains(p, "\\")
}

// inRepo reports whether a cleaned, slash-separated, repo-relative path stays
// inside the repo.
func inRepo(rel string) bool {
	rel = path.Clean(rel)
	return rel != ".." && !strings.HasPrefix(rel, "../") && !path.IsAbs(rel)
}

func validHash(h string) bool {
	hex, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		c := hex[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
