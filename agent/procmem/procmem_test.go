package procmem

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestSetLimit(t *testing.T) {
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	limited := func(n int64) func() (int64, bool) { return func() (int64, bool) { return n, true } }
	none := func() (int64, bool) { return 0, false }
	for _, tc := range []struct {
		name       string
		gomemlimit string // "" leaves GOMEMLIMIT unset
		fraction   float64
		limit      func() (int64, bool)
		want       int64
		wantOK     bool
	}{
		{name: "half of the container's", fraction: 0.5, limit: limited(256 << 20), want: 128 << 20, wantOK: true},
		{name: "all of it", fraction: 1, limit: limited(100 << 20), want: 100 << 20, wantOK: true},
		{name: "no container limit", fraction: 0.5, limit: none},
		{name: "GOMEMLIMIT wins", gomemlimit: "64MiB", fraction: 0.5, limit: limited(256 << 20)},
		{name: "fraction zero", fraction: 0, limit: limited(256 << 20)},
		{name: "fraction above one", fraction: 1.5, limit: limited(256 << 20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gomemlimit != "" {
				t.Setenv("GOMEMLIMIT", tc.gomemlimit)
			}
			debug.SetMemoryLimit(math.MaxInt64)
			got, ok := SetLimit(tc.fraction, tc.limit)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("SetLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
			runtimeLimit := debug.SetMemoryLimit(-1)
			if tc.wantOK && runtimeLimit != tc.want {
				t.Errorf("runtime limit %d, want %d", runtimeLimit, tc.want)
			}
			if !tc.wantOK && runtimeLimit != math.MaxInt64 {
				t.Errorf("runtime limit changed to %d", runtimeLimit)
			}
		})
	}
}
