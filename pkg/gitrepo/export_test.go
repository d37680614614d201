package gitrepo

// SetMaxPacks lowers the compaction threshold so a test needs few commits.
func SetMaxPacks(n int) (restore func()) {
	old := maxPacks
	maxPacks = n
	return func() { maxPacks = old }
}
