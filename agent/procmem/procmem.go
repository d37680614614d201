package procmem

import (
	"math"
	"os"
	"runtime/debug"
)

// SetLimit sets the Go runtime's soft memory limit to fraction (in (0, 1])
// of the container's memory limit, as limit reports it, and returns the
// limit set. It sets nothing, and returns false, when GOMEMLIMIT is set
// (the runtime already honours it), when there is no container limit, or
// when fraction is out of range.
func SetLimit(fraction float64, limit func() (int64, bool)) (int64, bool) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok || fraction <= 0 || fraction > 1 {
		return 0, false
	}
	l, ok := limit()
	if !ok || l <= 0 {
		return 0, false
	}
	soft := int64(math.Floor(float64(l) * fraction))
	debug.SetMemoryLimit(soft)
	return soft, true
}

// Released is what Release handed back.
type Released struct {
	// ExecutableBytes were resident pages of the executable's read-only
	// mappings, no longer mapped (still in the page cache).
	ExecutableBytes int64
}

// Release returns the heap's free pages to the OS and drops the
// executable's clean read-only pages from the process's page tables (see
// the package documentation). Call it when the process is about to idle:
// after a cycle. The error, if any, is from reading /proc; the heap is
// released anyway.
func Release() (Released, error) {
	debug.FreeOSMemory()
	n, err := dropExecutablePages()
	return Released{ExecutableBytes: n}, err
}
