package fleet

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// didYouMean is ", did you mean "x"?" when one known field is close to the
// unknown key (a typo or a wrong case), else "". Close: equal but for case,
// or within an edit distance of one per four characters (at least one, at
// most three), the nearest winning and ties going to the first name in
// sorted order, so the suggestion is stable.
func didYouMean(fields map[string]reflect.Type, key string) string {
	if len(fields) == 0 || key == "" {
		return ""
	}
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	limit := min(max(len(key)/4, 1), 3)
	best, bestDist := "", limit+1
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return fmt.Sprintf("; did you mean %q?", n)
		}
		if d := editDistance(strings.ToLower(n), strings.ToLower(key)); d < bestDist {
			best, bestDist = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the Levenshtein distance of a and b (bytes; field names
// are ASCII), with adjacent transpositions counting one (optimal string
// alignment), the commonest typo.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// fieldsAt is the JSON fields of the struct holding the last field of rel
// (a path such as syncPolicies[1].destination.flet below t), nil when rel
// does not lead through structs, lists and maps of t.
func fieldsAt(t reflect.Type, rel string) map[string]reflect.Type {
	segs := strings.Split(rel, ".")
	for _, seg := range segs[:len(segs)-1] {
		name, _, _ := strings.Cut(seg, "[")
		t = derefType(t)
		switch t.Kind() {
		case reflect.Struct:
			ft, ok := jsonFields(t)[name]
			if !ok {
				return nil
			}
			t = ft
		case reflect.Map:
			t = t.Elem()
		default:
			return nil
		}
		for n := strings.Count(seg, "["); n > 0; n-- {
			t = derefType(t)
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return nil
			}
			t = t.Elem()
		}
	}
	t = derefType(t)
	if t.Kind() != reflect.Struct {
		return nil
	}
	return jsonFields(t)
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// lastSegment is the field name at the end of a path, list indices cut.
func lastSegment(rel string) string {
	if i := strings.LastIndexByte(rel, '.'); i >= 0 {
		rel = rel[i+1:]
	}
	name, _, _ := strings.Cut(rel, "[")
	return name
}
