package cijob

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestForge: triggers while a run runs leave one run waiting, which
// starts when it ends; runs never overlap.
func TestForge(t *testing.T) {
	tests := []struct {
		name     string
		triggers int // while the first run runs
		runs     int
	}{
		{"one trigger, one run", 0, 1},
		{"a trigger while running waits", 1, 2},
		{"a burst of triggers is one waiting run", 5, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var events []string
			release := make(chan struct{})
			f := NewForge(context.Background(), func(_ context.Context, n int) error {
				mu.Lock()
				events = append(events, "start")
				mu.Unlock()
				if n == 1 {
					<-release
				}
				mu.Lock()
				events = append(events, "end")
				mu.Unlock()
				return nil
			})
			f.Trigger()
			for range tc.triggers {
				f.Trigger()
			}
			time.Sleep(10 * time.Millisecond)
			close(release)
			runs, errs := f.Wait()
			if runs != tc.runs || len(errs) > 0 {
				t.Fatalf("%d runs (%v), want %d", runs, errs, tc.runs)
			}
			want := slices.Repeat([]string{"start", "end"}, tc.runs)
			if !slices.Equal(events, want) {
				t.Errorf("events %v, want %v (runs overlap)", events, want)
			}
		})
	}
}
