// Package golden compares test output with golden files and rewrites them
// when the test binary runs with -update:
//
//	golden.Assert(t, filepath.Join("testdata", "golden", "x.yaml"), got)
//
//	go test ./pkg/render -update   # rewrite, then review the git diff
//
// The -update flag is registered here, once per test binary; a package that
// uses Assert must not register its own.
package golden
