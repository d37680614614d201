package status

import (
	"errors"
	"fmt"
	"testing"
)

func TestFailureOf(t *testing.T) {
	inner := Stalling(ReasonRenderFailed, errors.New("bad chart"))
	outer := Retrying(ReasonDecryptionFailed, fmt.Errorf("unit web: %w", inner))
	tests := []struct {
		name    string
		err     error
		reason  string
		stalled bool
		text    string
	}{
		{"plain", errors.New("boom"), ReasonApplyFailed, false, "boom"},
		{"failure", inner, ReasonRenderFailed, true, "bad chart"},
		{"wrapped failure keeps the context", fmt.Errorf("revision r1: %w", inner), ReasonRenderFailed, true, "revision r1: bad chart"},
		{"the outermost wins", outer, ReasonDecryptionFailed, false, "unit web: bad chart"},
		{"joined: the first", errors.Join(inner, Retrying(ReasonConflict, errors.New("taken"))), ReasonRenderFailed, true, "bad chart\ntaken"},
	}
	for _, tc := range tests {
		f := FailureOf(tc.err, ReasonApplyFailed)
		if f.Reason != tc.reason || f.Stalled != tc.stalled || f.Error() != tc.text || !errors.Is(f, tc.err) {
			t.Errorf("%s: FailureOf = %s, stalled %v, %q; want %s, %v, %q", tc.name, f.Reason, f.Stalled, f.Error(), tc.reason, tc.stalled, tc.text)
		}
	}
	if Stalling(ReasonRenderFailed, nil) != nil || Retrying(ReasonConflict, nil) != nil {
		t.Error("a nil error became a failure")
	}
}
