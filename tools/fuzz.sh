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
		echo "fuzz: $pkg $fn ($fuzztime)"
		if ! out="$(go test -run '^$' -fuzz "^$fn\$" -fuzztime "$fuzztime" "$pkg" 2>&1)"; then
			echo "$out"
			echo "fuzz: $pkg $fn failed" >&2
			exit 1
		fi
		count=$((count + 1))
	done
done < <(go list -f '{{.ImportPath}} {{.Dir}}' ./...)
[[ $count -gt 0 ]] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }
echo "fuzz: $count targets passed"
