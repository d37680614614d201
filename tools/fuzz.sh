#!/usr/bin/env bash
# Runs every native Go fuzz target of the flotilla module for a short time
# beyond its seed corpus (the seeds already run in `go test`), so CI finds
# the crashes a few seconds of mutation finds. A failure leaves the input
# under the package's testdata/fuzz/ for `go test` to replay.
#
# Usage: tools/fuzz.sh [FUZZTIME]   (default 5s per target)
set -euo pipefail
fuzztime="${1:-5s}"
cd "$(dirname "$0")/.."
count=0
while read -r pkg dir; do
	for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | cut -c6-); do
		for attempt in 1 2 3; do
			echo "fuzz: $pkg $fn ($fuzztime)"
			before="$(ls "$dir/testdata/fuzz/$fn" 2>/dev/null | sort || true)"
			if out="$(go test -run '^$' -fuzz "^$fn\$" -fuzztime "$fuzztime" "$pkg" 2>&1)"; then
				break
			fi
			after="$(ls "$dir/testdata/fuzz/$fn" 2>/dev/null | sort || true)"
			# Go 1.26's fuzzing coordinator can fail a target at the end of
			# -fuzztime with a bare "context deadline exceeded" when a busy
			# machine delays a worker (go.dev/issue/75804, fixed in Go 1.27).
			# A real failure always writes its input under testdata/fuzz/:
			# without one, that race is retried, not reported.
			if [[ "$before" == "$after" && "$out" == *"context deadline exceeded"* && $attempt -lt 3 ]]; then
				echo "fuzz: $pkg $fn stopped by Go's fuzztime deadline race with no failing input (go.dev/issue/75804): again"
				continue
			fi
			echo "$out"
			echo "fuzz: $pkg $fn failed" >&2
			exit 1
		done
		count=$((count + 1))
	done
done < <(go list -f '{{.ImportPath}} {{.Dir}}' ./...)
[[ $count -gt 0 ]] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }
echo "fuzz: $count targets passed"
