package slice

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
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
