package status

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// ShardPlaceholder in a status repo URL is replaced by the cluster's shard.
const ShardPlaceholder = "{shard}"

// Shard returns the status shard (0 … shards-1) of a cluster: a stable hash
// of its name, so a cluster keeps its shard as clusters come and go (only a
// change of shards moves clusters).
func Shard(cluster string, shards int) int {
	if shards <= 1 {
		return 0
	}
	sum := sha256.Sum256([]byte(cluster))
	return int(binary.BigEndian.Uint32(sum[:4]) % uint32(shards))
}

// ShardURL resolves a status repo URL template for a cluster: every
// {shard} becomes Shard(cluster, shards). A template without the
// placeholder is returned as is when shards <= 1, and is an error
// otherwise (every cluster would land in one repo).
func ShardURL(template, cluster string, shards int) (string, error) {
	if !strings.Contains(template, ShardPlaceholder) {
		if shards > 1 {
			return "", fmt.Errorf("status repo %q has no %s placeholder for %d shards", template, ShardPlaceholder, shards)
		}
		return template, nil
	}
	if shards < 1 {
		return "", fmt.Errorf("status repo %q: %d shards; need at least 1", template, shards)
	}
	return strings.ReplaceAll(template, ShardPlaceholder, strconv.Itoa(Shard(cluster, shards))), nil
}

// ShardURLs returns every shard's URL of a template, in shard order (one
// URL, the template itself, when it has no placeholder).
func ShardURLs(template string, shards int) []string {
	if !strings.Contains(template, ShardPlaceholder) || shards <= 1 {
		if shards <= 1 {
			return []string{strings.ReplaceAll(template, ShardPlaceholder, "0")}
		}
		return []string{template}
	}
	out := make([]string, shards)
	for i := range out {
		out[i] = strings.ReplaceAll(template, ShardPlaceholder, strconv.Itoa(i))
	}
	return out
}
