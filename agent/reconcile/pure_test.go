package reconcile

import (
	"context"
	"testing"
	"time"
)

func TestJitter(t *testing.T) {
	const d = time.Minute
	if Jitter(d, 0) != d || Jitter(0, 0.1) != 0 {
		t.Fatal("no jitter expected")
	}
	lo, hi := d, d
	for range 2000 {
		j := Jitter(d, 0.1)
		if j < d-d/10 || j > d+d/10 {
			t.Fatalf("Jitter(1m, 0.1) = %s, outside ±10%%", j)
		}
		lo, hi = min(lo, j), max(hi, j)
	}
	if hi-lo < d/10 {
		t.Errorf("jitter spread %s is too narrow", hi-lo)
	}
}

func TestGraceContext(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	ctx, cancel := graceContext(parent, 100*time.Millisecond)
	defer cancel()
	stop()
	if ctx.Err() != nil {
		t.Fatal("cancelled at once; want a grace period")
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute): // generous: only a missing cancel takes this long
		t.Fatal("not cancelled after the grace period")
	}

	// Releasing it before the parent ends cancels it and leaks no timer.
	parent2, stop2 := context.WithCancel(context.Background())
	defer stop2()
	ctx2, cancel2 := graceContext(parent2, time.Hour)
	cancel2()
	if ctx2.Err() == nil {
		t.Fatal("cancel did not end the context")
	}
}

func TestPollDelayBacksOffWhileGitFails(t *testing.T) {
	const poll, interval = 5 * time.Second, time.Minute
	for range 200 {
		if d := pollDelay(poll, interval, 0.1, 0); d < poll-poll/10 || d > poll+poll/10 {
			t.Fatalf("healthy poll delay %s, want %s ±10%%", d, poll)
		}
	}
	// Failure n waits between half and all of min(interval, 2·poll·2^(n-1)).
	for failures, upper := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 4: interval, 10: interval, 1000: interval} {
		for range 200 {
			if d := pollDelay(poll, interval, 0.1, failures); d < upper/2 || d > upper {
				t.Fatalf("after %d failures: delay %s, want within [%s, %s]", failures, d, upper/2, upper)
			}
		}
	}
	// Polling once per interval: nothing to back off to.
	if d := pollDelay(interval, interval, 0, 5); d != interval {
		t.Fatalf("poll = interval: delay %s", d)
	}
}
