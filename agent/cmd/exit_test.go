package cmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"
)

func TestExitCause(t *testing.T) {
	tests := []struct {
		err, ctxErr error
		want        string
	}{
		{fmt.Errorf("run: %w", ErrLeaderElectionLost), nil, ExitLeaseLost},
		{nil, context.Canceled, ExitSignal},
		{context.Canceled, context.Canceled, ExitSignal},
		{errors.New("listen :8080: address in use"), nil, ExitError},
		{nil, nil, ""},
	}
	for _, tt := range tests {
		if got := exitCause(tt.err, tt.ctxErr); got != tt.want {
			t.Errorf("exitCause(%v, %v) = %q, want %q", tt.err, tt.ctxErr, got, tt.want)
		}
	}
}

// TestExitRecordSurvivesRestarts: each process start sees the causes of
// the exits before it; one that ended without recording counts as unknown.
func TestExitRecordSurvivesRestarts(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []struct {
		exit       string // "" ends the process without recording (a kill)
		wantCounts map[string]int
		wantLast   string
	}{
		{ExitLeaseLost, map[string]int{}, ""},
		{ExitLeaseLost, map[string]int{ExitLeaseLost: 1}, ExitLeaseLost},
		{"", map[string]int{ExitLeaseLost: 2}, ExitLeaseLost},
		{ExitSignal, map[string]int{ExitLeaseLost: 2, ExitUnknown: 1}, ExitUnknown},
		{ExitSignal, map[string]int{ExitLeaseLost: 2, ExitUnknown: 1, ExitSignal: 1}, ExitSignal},
	}
	for i, s := range steps {
		rec, err := startExitRecord(dir, now)
		if err != nil {
			t.Fatal(err)
		}
		got := maps.Clone(rec.Exits)
		if got == nil {
			got = map[string]int{}
		}
		if !maps.Equal(got, s.wantCounts) || rec.LastCause != s.wantLast {
			t.Fatalf("start %d: exits %v last %q, want %v last %q", i, got, rec.LastCause, s.wantCounts, s.wantLast)
		}
		if s.exit != "" {
			if err := finishExitRecord(dir, rec, s.exit, now); err != nil {
				t.Fatal(err)
			}
		}
	}
}
