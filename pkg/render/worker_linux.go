package render

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

const rssSupported = true

// residentBytes reads a process's resident set size from /proc.
func residentBytes(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// workerAddressSpace is the address space a worker may add to what it has
// mapped at start: a backstop for allocations faster than the RSS poll
// (one huge slice), far above any per-request MaxHelmMemory in use.
const workerAddressSpace = 8 << 30

// limitAddressSpace caps the worker's virtual memory, so a runaway
// allocation fails inside the worker (which then dies alone) instead of
// pushing the machine into the OOM killer.
func limitAddressSpace() {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return
	}
	f := bytes.Fields(b)
	if len(f) < 1 {
		return
	}
	pages, err := strconv.ParseUint(string(f[0]), 10, 64)
	if err != nil {
		return
	}
	limit := pages*uint64(os.Getpagesize()) + workerAddressSpace
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit})
}
