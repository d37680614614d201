package slice

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
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
// commits hold exactly these (gitrepo.CutSlices).
func (s *Slice) RepoPaths() []string {
	set := map[string]bool{ClusterDir(s.Cluster): true}
	for _, u := range s.Units {
		set[u.Path] = true
		for _, in := range u.Inputs {
			set[in.Path] = true
		}
		if u.Helm != nil {
			set[u.Helm.Chart] = true
			if u.Helm.Values != "" {
				set[u.Helm.Values] = true
			}
		}
	}
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
