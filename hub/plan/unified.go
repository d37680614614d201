package plan

import (
	"fmt"
	"strings"
)

// contextLines is how many unchanged lines surround each change in a hunk,
// as diff -u.
const contextLines = 3

// maxEditDistance bounds the work and memory of one line diff (both grow
// with the square of the number of changed lines); a diff with more
// changes falls back to replacing the whole changed region, still a
// correct diff, just not a minimal one.
const maxEditDistance = 2000

type editOp byte

const (
	opEqual  editOp = ' '
	opDelete editOp = '-'
	opInsert editOp = '+'
)

type edit struct {
	op   editOp
	line string
}

// splitLines splits text into lines without their newline; a final
// newline does not make an empty last line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n")
}

// lineEdits returns a shortest edit script turning a into b (Myers' O(ND)
// algorithm), deletions before insertions within a change.
func lineEdits(a, b []string) []edit {
	// Common prefix and suffix cost nothing and shrink the search.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	out := make([]edit, 0, len(a)+len(b))
	for _, l := range a[:pre] {
		out = append(out, edit{opEqual, l})
	}
	out = append(out, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		out = append(out, edit{opEqual, l})
	}
	return out
}

func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	replaceAll := func() []edit {
		out := make([]edit, 0, n+m)
		for _, l := range a {
			out = append(out, edit{opDelete, l})
		}
		for _, l := range b {
			out = append(out, edit{opInsert, l})
		}
		return out
	}
	if n == 0 || m == 0 {
		return replaceAll()
	}
	max := n + m
	offset := max
	v := make([]int, 2*max+2)
	// trace[d] is the frontier before step d, diagonals -d..d.
	var trace [][]int
	for d := 0; d <= max; d++ {
		if d > maxEditDistance {
			return replaceAll()
		}
		trace = append(trace, append([]int(nil), v[offset-d:offset+d+1]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[offset+k-1] < v[offset+k+1]) {
				x = v[offset+k+1] // down: insertion
			} else {
				x = v[offset+k-1] + 1 // right: deletion
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[offset+k] = x
			if x >= n && y >= m {
				return backtrack(trace, a, b, d)
			}
		}
	}
	return nil // unreachable: d = n+m always reaches the end
}

// backtrack walks the saved frontiers from the end to the start.
func backtrack(trace [][]int, a, b []string, d int) []edit {
	x, y := len(a), len(b)
	var rev []edit
	for ; d > 0; d-- {
		v := trace[d] // index k+d is diagonal k
		k := x - y
		var prevK int
		if k == -d || (k != d && v[d+k-1] < v[d+k+1]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := v[d+prevK]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x--
			y--
			rev = append(rev, edit{opEqual, a[x]})
		}
		if x == prevX {
			y--
			rev = append(rev, edit{opInsert, b[y]})
		} else {
			x--
			rev = append(rev, edit{opDelete, a[x]})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, edit{opEqual, a[x]})
	}
	out := make([]edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return groupChanges(out)
}

// groupChanges orders each run of changes as deletions then insertions,
// the way diff -u prints them.
func groupChanges(es []edit) []edit {
	out := make([]edit, 0, len(es))
	for i := 0; i < len(es); {
		if es[i].op == opEqual {
			out = append(out, es[i])
			i++
			continue
		}
		j := i
		for j < len(es) && es[j].op != opEqual {
			j++
		}
		for _, e := range es[i:j] {
			if e.op == opDelete {
				out = append(out, e)
			}
		}
		for _, e := range es[i:j] {
			if e.op == opInsert {
				out = append(out, e)
			}
		}
		i = j
	}
	return out
}

// unifiedDiff returns the hunks of a unified diff from a to b (without
// file headers), "" when they are equal.
func unifiedDiff(a, b string) string {
	if a == b {
		return ""
	}
	es := lineEdits(splitLines(a), splitLines(b))
	var sb strings.Builder
	// Positions (0-based) in a and b at each edit index.
	ai, bi := make([]int, len(es)+1), make([]int, len(es)+1)
	for i, e := range es {
		ai[i+1], bi[i+1] = ai[i], bi[i]
		if e.op != opInsert {
			ai[i+1]++
		}
		if e.op != opDelete {
			bi[i+1]++
		}
	}
	for i := 0; i < len(es); {
		if es[i].op == opEqual {
			i++
			continue
		}
		// A hunk starts contextLines before the first change and grows
		// while the next change is within 2×contextLines.
		start := max(0, i-contextLines)
		end := i
		for end < len(es) {
			if es[end].op != opEqual {
				end++
				continue
			}
			run := end
			for run < len(es) && es[run].op == opEqual {
				run++
			}
			if run == len(es) || run-end > 2*contextLines {
				end = min(len(es), end+contextLines)
				break
			}
			end = run
		}
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(ai[start], ai[end]-ai[start]), hunkRange(bi[start], bi[end]-bi[start]))
		for _, e := range es[start:end] {
			sb.WriteByte(byte(e.op))
			sb.WriteString(e.line)
			sb.WriteByte('\n')
		}
		i = end
	}
	return sb.String()
}

// hunkRange formats a hunk side as diff -u does: 1-based start, and the
// count only when it is not 1 (an empty side starts at the line before).
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}

// wholeText prints every line of s prefixed by op: the diff of an added or
// removed object.
func wholeText(op editOp, s string) string {
	lines := splitLines(s)
	if len(lines) == 0 {
		return ""
	}
	var sb strings.Builder
	if op == opInsert {
		fmt.Fprintf(&sb, "@@ -0,0 +%s @@\n", hunkRange(0, len(lines)))
	} else {
		fmt.Fprintf(&sb, "@@ -%s +0,0 @@\n", hunkRange(0, len(lines)))
	}
	for _, l := range lines {
		sb.WriteByte(byte(op))
		sb.WriteString(l)
		sb.WriteByte('\n')
	}
	return sb.String()
}
