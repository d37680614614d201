//go:build !linux

package render

// Without /proc the worker's memory is not watched; the render deadline
// still bounds it.
const rssSupported = false

func residentBytes(int) int64 { return 0 }

func limitAddressSpace() {}
