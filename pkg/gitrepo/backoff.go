package gitrepo

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Backoff computes exponential retry delays with jitter. The zero value
// starts at 100ms, doubles, and caps at 30s.
type Backoff struct {
	Initial time.Duration // first delay; 100ms when zero
	Max     time.Duration // cap; 30s when zero
	Factor  float64       // growth per attempt; 2 when < 1
}

// Delay returns the delay before retry number attempt (0 for the first
// retry): a value between half and all of min(Max, Initial·Factor^attempt),
// chosen at random ("equal jitter"), so that writers that collided do not
// collide again while a floor keeps the delays growing.
func (b Backoff) Delay(attempt int) time.Duration {
	initial, limit, factor := b.Initial, b.Max, b.Factor
	if initial <= 0 {
		initial = 100 * time.Millisecond
	}
	if limit <= 0 {
		limit = 30 * time.Second
	}
	if factor < 1 {
		factor = 2
	}
	if attempt < 0 {
		attempt = 0
	}
	d := float64(initial) * math.Pow(factor, float64(attempt))
	if d > float64(limit) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(limit)
	}
	half := d / 2
	return time.Duration(half + rand.Float64()*half)
}

// Wait sleeps for Delay(attempt) or until ctx is done, returning ctx's error
// in that case.
func (b Backoff) Wait(ctx context.Context, attempt int) error {
	t := time.NewTimer(b.Delay(attempt))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
