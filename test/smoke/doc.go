// Package smoke holds the smoke tests that prove the test environment is
// real: pods really get scheduled onto kwok nodes, Volcano really
// gang-schedules, and (from test/gitserver's owner) Git really enforces
// credentials. The tests live in package smoke_test; this file only
// documents the package.
package smoke
