// Package procmem owns the agent process's memory footprint between
// cycles: it gives the Go runtime a soft memory limit taken from the
// container's, and after each cycle hands back what the cycle touched but
// the idle agent does not need.
//
// A cycle that renders and applies (a cold apply, a new commit) runs code
// an idle agent never runs again until the next commit: krusty, kyaml,
// YAML and JSON codecs, SOPS. The executable's pages it faulted in stay
// mapped, counted in the process's resident set, long after. Release drops
// them from the process's page tables (madvise MADV_DONTNEED on the
// executable's clean read-only mappings: its text and read-only data,
// never a mapping holding a written page). They stay in the page cache,
// where the kernel treats them as any other clean file page, and the next
// cycle faults back in only the code it runs: the resident set becomes
// what the steady loop actually uses. Release also returns the Go heap's
// free pages (debug.FreeOSMemory).
//
// SetLimit gives the runtime a soft limit (debug.SetMemoryLimit) of a
// fraction of the container's memory limit, unless GOMEMLIMIT is set, so
// that the garbage collector works harder before the kernel's OOM killer
// has to act.
//
// On systems other than Linux, Release only frees the heap.
package procmem
