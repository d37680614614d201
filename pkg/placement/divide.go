package placement

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"
)

// Errors returned by Divide, for errors.Is.
var (
	ErrNegative  = errors.New("negative value")
	ErrDuplicate = errors.New("cluster listed twice")
	ErrNoWeight  = errors.New("replicas to divide but every weight is zero")
	ErrOverflow  = errors.New("sum of weights overflows")
)

// Weight is one cluster's static weight.
type Weight struct {
	Cluster string
	Weight  int64
}

// Share is the replicas one cluster receives.
type Share struct {
	Cluster  string
	Replicas int64
}

// Divide splits total across the weighted clusters by the largest remainder
// method: each cluster first gets floor(total·w/W); the replicas left over go
// one each to the clusters with the largest remainders, ties broken by
// cluster name (ascending), so the result always sums to total exactly and
// never depends on input order. Clusters with weight 0 get 0.
//
// The result has one Share per input cluster, sorted by cluster name.
func Divide(total int64, weights []Weight) ([]Share, error) {
	if total < 0 {
		return nil, fmt.Errorf("divide %d replicas: %w", total, ErrNegative)
	}
	type entry struct {
		cluster   string
		weight    uint64
		replicas  uint64
		remainder uint64
	}
	entries := make([]entry, len(weights))
	seen := make(map[string]struct{}, len(weights))
	var sum uint64
	for i, w := range weights {
		if w.Weight < 0 {
			return nil, fmt.Errorf("weight %d of cluster %q: %w", w.Weight, w.Cluster, ErrNegative)
		}
		if _, dup := seen[w.Cluster]; dup {
			return nil, fmt.Errorf("cluster %q: %w", w.Cluster, ErrDuplicate)
		}
		seen[w.Cluster] = struct{}{}
		var carry uint64
		sum, carry = bits.Add64(sum, uint64(w.Weight), 0)
		if carry != 0 {
			return nil, fmt.Errorf("weights: %w", ErrOverflow)
		}
		entries[i] = entry{cluster: w.Cluster, weight: uint64(w.Weight)}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].cluster < entries[j].cluster })
	if total > 0 && sum == 0 {
		return nil, fmt.Errorf("divide %d replicas over %d clusters: %w", total, len(weights), ErrNoWeight)
	}
	var assigned uint64
	if sum > 0 {
		for i := range entries {
			// total·w fits in 128 bits and the quotient in 64 (w ≤ sum).
			hi, lo := bits.Mul64(uint64(total), entries[i].weight)
			entries[i].replicas, entries[i].remainder = bits.Div64(hi, lo, sum)
			assigned += entries[i].replicas
		}
	}
	left := uint64(total) - assigned // < len(entries): each floor loses < 1
	if left > 0 {
		order := make([]int, len(entries))
		for i := range order {
			order[i] = i
		}
		// entries are already sorted by name, so a stable sort by remainder
		// breaks ties by name.
		sort.SliceStable(order, func(a, b int) bool {
			return entries[order[a]].remainder > entries[order[b]].remainder
		})
		for _, i := range order[:left] {
			entries[i].replicas++
		}
	}
	out := make([]Share, len(entries))
	for i, e := range entries {
		out[i] = Share{Cluster: e.cluster, Replicas: int64(e.replicas)}
	}
	return out, nil
}
