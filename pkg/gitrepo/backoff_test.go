package gitrepo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

func TestBackoffDelay(t *testing.T) {
	for _, tc := range []struct {
		name     string
		b        gitrepo.Backoff
		attempt  int
		min, max time.Duration
	}{
		{"zero value first retry", gitrepo.Backoff{}, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{"zero value doubles", gitrepo.Backoff{}, 3, 400 * time.Millisecond, 800 * time.Millisecond},
		{"zero value caps at 30s", gitrepo.Backoff{}, 50, 15 * time.Second, 30 * time.Second},
		{"huge attempt does not overflow", gitrepo.Backoff{}, 1 << 20, 15 * time.Second, 30 * time.Second},
		{"negative attempt is the first", gitrepo.Backoff{Initial: time.Second}, -3, 500 * time.Millisecond, time.Second},
		{"custom factor", gitrepo.Backoff{Initial: time.Second, Factor: 3, Max: time.Hour}, 2, 4500 * time.Millisecond, 9 * time.Second},
		{"custom cap", gitrepo.Backoff{Initial: time.Second, Max: 2 * time.Second}, 10, time.Second, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for i := 0; i < 200; i++ {
				d := tc.b.Delay(tc.attempt)
				if d < tc.min || d > tc.max {
					t.Fatalf("Delay(%d) = %v, want in [%v, %v]", tc.attempt, d, tc.min, tc.max)
				}
				seen[d] = true
			}
			if len(seen) < 10 {
				t.Fatalf("only %d distinct delays in 200: no jitter", len(seen))
			}
		})
	}
}

func TestBackoffWaitHonoursContext(t *testing.T) {
	// The delay is at least half an hour, so DeadlineExceeded proves the
	// context ended the wait; how long that took is no test's business.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := (gitrepo.Backoff{Initial: time.Hour}).Wait(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want context.DeadlineExceeded", err)
	}
	if err := (gitrepo.Backoff{Initial: time.Millisecond}).Wait(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
}
