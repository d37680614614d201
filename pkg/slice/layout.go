package slice

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"slices"
	"sort"
	"strings"
)

// Bucket spreads clusters over 256 directories by a stable hash of the name,
// so rendered/ never holds more than a few thousand entries per directory
// (GitHub's guidance) even at hundreds of thousands of clusters.
func Bucket(cluster string) string {
	sum := sha256.Sum256([]byte(cluster))
	return hex.EncodeToString(sum[:1])
}

// ClusterDir is the slash-separated, repo-relative directory of a cluster's
// slice: rendered/<bucket>/<cluster>.
func ClusterDir(cluster string) string {
	return path.Join(RenderedDir, Bucket(cluster), cluster)
}

// SlicePath is the repo-relative path of a cluster's slice.yaml.
func SlicePath(cluster string) string {
	return path.Join(ClusterDir(cluster), FileName)
}

// UnitDir is the repo-relative directory of one unit of a cluster.
func UnitDir(cluster, unit string) string {
	return path.Join(ClusterDir(cluster), unit)
}

// RepoPaths are the repo paths an agent needs to apply s: its cluster
// directory and every source its units read (inputs and Helm charts),
// sorted, without one nested in another. The hub's published slice
// commits hold these (gitrepo.CutSlices), less RepoExclusions.
func (s *Slice) RepoPaths() []string {
	set := map[string]bool{ClusterDir(s.Cluster): true}
	s.sources(func(p, _ string) { set[p] = true })
	all := make([]string, 0, len(set))
	for p := range set {
		all = append(all, p)
	}
	sort.Strings(all)
	out := all[:0]
	for _, p := range all {
		if n := len(out); n > 0 && (p == out[n-1] || strings.HasPrefix(p, out[n-1]+"/")) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// RepoExclusions are the files inside RepoPaths that no unit of s reads:
// the entries an input leaves out of its hash (an application's app.yaml,
// whose effect is in the units' generated files), unless another input or
// path of the slice takes them in. An app.yaml that weighs every cluster
// of the fleet grows with the fleet; a slice without it does not. Sorted.
func (s *Slice) RepoExclusions() []string {
	var whole []string
	excepts := map[string]map[string]bool{} // input path → the entries inputs on it leave out
	s.sources(func(p, except string) {
		if except == "" {
			whole = append(whole, p)
			return
		}
		if excepts[p] == nil {
			excepts[p] = map[string]bool{}
		}
		excepts[p][except] = true
	})
	var out []string
	for dir, entries := range excepts {
		if len(entries) != 1 {
			continue // inputs on dir leave out different entries: each needs the other's
		}
		for entry := range entries {
			p := path.Join(dir, entry)
			if !slices.ContainsFunc(whole, func(q string) bool { return q == p || strings.HasPrefix(p, q+"/") }) {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// sources calls visit with every repo path a unit of s reads: unit
// directories, inputs (with the top-level entry the input leaves out, if
// any) and Helm charts and values.
func (s *Slice) sources(visit func(p, except string)) {
	for _, u := range s.Units {
		visit(u.Path, "")
		for _, in := range u.Inputs {
			visit(in.Path, in.Except)
		}
		if u.Helm != nil {
			visit(u.Helm.Chart, "")
			if u.Helm.Values != "" {
				visit(u.Helm.Values, "")
			}
		}
	}
}
