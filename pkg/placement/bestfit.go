package placement

import (
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Errors of BestFit, for errors.Is.
var (
	// ErrNoFit: no candidate has room for the gang (a *NoFitError).
	ErrNoFit = errors.New("no cluster fits the gang")
	// ErrNoCapacity: no candidate's capacity is known.
	ErrNoCapacity = errors.New("no cluster has a known capacity")
)

// Capacity is what a cluster can take now, as the hub knows it.
type Capacity struct {
	// Free is allocatable minus what the cluster's running pods request.
	Free corev1.ResourceList
	// QueueFree is, per Volcano queue, what the queue may still take
	// (capability minus allocated); a resource a queue does not list is
	// not limited by it. A queue absent here is not limited.
	QueueFree map[string]corev1.ResourceList
}

// Candidate is one cluster BestFit may choose.
type Candidate struct {
	Cluster string
	// Free is what the cluster can take; see Capacity.Free.
	Free corev1.ResourceList
	// QueueFree is what the job's queue may still take there; nil when
	// the queue does not limit it.
	QueueFree corev1.ResourceList
	// Queue names the job's queue, for messages.
	Queue string
}

// available is what the candidate can give of one resource: the least of
// its free amount and its queue's room.
func (c *Candidate) available(name corev1.ResourceName) (q resource.Quantity, byQueue bool) {
	q = quantity(c.Free, name)
	if qf, ok := c.QueueFree[name]; ok && qf.Cmp(q) < 0 {
		return qf, true
	}
	return q, false
}

// Shortfall is what keeps the gang off a cluster: the resource it lacks
// most (smallest available/needed ratio).
type Shortfall struct {
	Cluster  string
	Resource corev1.ResourceName
	Need     resource.Quantity
	Have     resource.Quantity
	// Queue is set when the queue's room, not the cluster's, is short.
	Queue string
}

// NoFitError names the candidate that came closest.
type NoFitError struct {
	Best Shortfall
}

func (e *NoFitError) Error() string {
	b := e.Best
	where := ""
	if b.Queue != "" {
		where = " free in queue " + b.Queue
	}
	return fmt.Sprintf("needs %s %s, best cluster %s has %s%s", b.Need.String(), b.Resource, b.Cluster, b.Have.String(), where)
}

// Is makes errors.Is(err, ErrNoFit) hold.
func (e *NoFitError) Is(target error) bool { return target == ErrNoFit }

// BestFit returns the candidate that fits need (the sum of a gang's
// requests) — every needed resource at most what the candidate has free and
// its queue may still take. Among fitting candidates it prefers the one with
// the most available of the scarcest resource (the needed resource with the
// largest need/available ratio summed over fitting candidates; ties by
// resource name), then the cluster name. Candidates without a known Free
// (nil) are skipped. The check is on aggregates: whether each pod fits on a
// single node is the agent's gang preflight's to tell.
//
// With no fit the error is a *NoFitError naming the closest candidate: the
// one whose worst resource ratio available/needed is highest (ties by name).
func BestFit(need corev1.ResourceList, cands []Candidate) (string, error) {
	names := neededResources(need)
	var known, fitting []*Candidate
	for i := range cands {
		c := &cands[i]
		if c.Free == nil {
			continue
		}
		known = append(known, c)
		if fits(c, need, names) {
			fitting = append(fitting, c)
		}
	}
	if len(known) == 0 {
		return "", ErrNoCapacity
	}
	if len(fitting) == 0 {
		return "", &NoFitError{Best: closest(known, need, names)}
	}
	if len(names) == 0 {
		sort.Slice(fitting, func(i, j int) bool { return fitting[i].Cluster < fitting[j].Cluster })
		return fitting[0].Cluster, nil
	}
	scarce := scarcest(fitting, need, names)
	sort.Slice(fitting, func(i, j int) bool {
		a, _ := fitting[i].available(scarce)
		b, _ := fitting[j].available(scarce)
		if c := a.Cmp(b); c != 0 {
			return c > 0
		}
		return fitting[i].Cluster < fitting[j].Cluster
	})
	return fitting[0].Cluster, nil
}

// neededResources are the resources need asks a positive amount of, sorted.
func neededResources(need corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for name, q := range need {
		if q.Sign() > 0 {
			out = append(out, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func fits(c *Candidate, need corev1.ResourceList, names []corev1.ResourceName) bool {
	for _, name := range names {
		have, _ := c.available(name)
		if n := need[name]; n.Cmp(have) > 0 {
			return false
		}
	}
	return true
}

// ratio is a/b as an exact rational over milli-units; b ≤ 0 is treated as
// an infinitely small denominator (ratio +∞ marked by inf).
type ratio struct {
	r   *big.Rat
	inf bool
}

func newRatio(a, b resource.Quantity) ratio {
	bm := b.AsDec()
	if bm.Sign() <= 0 {
		return ratio{inf: true}
	}
	num := new(big.Rat).SetFrac(a.AsDec().UnscaledBig(), big.NewInt(1))
	num.Mul(num, scaleRat(-int(a.AsDec().Scale())))
	den := new(big.Rat).SetFrac(bm.UnscaledBig(), big.NewInt(1))
	den.Mul(den, scaleRat(-int(bm.Scale())))
	return ratio{r: num.Quo(num, den)}
}

// scaleRat is 10^exp.
func scaleRat(exp int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil)
	if exp >= 0 {
		return new(big.Rat).SetInt(p)
	}
	return new(big.Rat).SetFrac(big.NewInt(1), p)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func (x ratio) cmp(y ratio) int {
	switch {
	case x.inf && y.inf:
		return 0
	case x.inf:
		return 1
	case y.inf:
		return -1
	}
	return x.r.Cmp(y.r)
}

// scarcest is the needed resource with the largest need/available ratio,
// available summed over the candidates.
func scarcest(cands []*Candidate, need corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceName {
	best := names[0]
	var bestRatio ratio
	for i, name := range names {
		total := resource.Quantity{}
		for _, c := range cands {
			q, _ := c.available(name)
			total.Add(q)
		}
		r := newRatio(need[name], total)
		if i == 0 || r.cmp(bestRatio) > 0 {
			best, bestRatio = name, r
		}
	}
	return best
}

// closest picks the candidate whose worst available/needed ratio is
// highest, and its worst resource.
func closest(cands []*Candidate, need corev1.ResourceList, names []corev1.ResourceName) Shortfall {
	var best Shortfall
	var bestRatio ratio
	found := false
	sorted := append([]*Candidate(nil), cands...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Cluster < sorted[j].Cluster })
	for _, c := range sorted {
		var worst Shortfall
		var worstRatio ratio
		for i, name := range names {
			have, byQueue := c.available(name)
			r := newRatio(have, need[name])
			if i == 0 || r.cmp(worstRatio) < 0 {
				worstRatio = r
				n := need[name]
				worst = Shortfall{Cluster: c.Cluster, Resource: name, Need: n.DeepCopy(), Have: have.DeepCopy()}
				if byQueue {
					worst.Queue = c.Queue
				}
			}
		}
		if !found || worstRatio.cmp(bestRatio) > 0 {
			best, bestRatio, found = worst, worstRatio, true
		}
	}
	return best
}

// FormatResources writes a resource list as "cpu=2, memory=4Gi", sorted by
// name, for messages.
func FormatResources(l corev1.ResourceList) string {
	names := make([]string, 0, len(l))
	for name := range l {
		names = append(names, string(name))
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		q := l[corev1.ResourceName(n)]
		parts[i] = n + "=" + q.String()
	}
	return strings.Join(parts, ", ")
}
