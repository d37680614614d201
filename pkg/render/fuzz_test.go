package render

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzScanYAML checks the alias-bomb scanner: it never panics, its cheap
// pre-check never skips a document whose aliases expand, and whatever it
// accepts decodes into at most max(parsed nodes, bombCeiling) values.
func FuzzScanYAML(f *testing.F) {
	for _, s := range []string{
		billionLaughs, smallBomb, configMap,
		"a: &a [*a]\n",
		"a: &a {b: 1}\nc:\n  <<: *a\n  d: 2\n",
		"- &x 1\n- *x\n- *x\n",
		"x: '&a' \ny: \"*a\"\n",
		"\xEF\xBB\xBF&a [1, *a]",
		"--- &d\na: 1\n--- *d\n",
		"{a: &a [1,2], b: [*a,*a]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		parsed, expanded, xerr := yamlExpansion(data)
		if !mayHaveAliases(data) && xerr == nil && expanded != parsed {
			t.Fatalf("pre-check skipped a document that expands %d nodes to %d", parsed, expanded)
		}
		err := ScanYAML(data)
		if err != nil {
			if !errors.Is(err, ErrYAMLBomb) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		var total int64
		for {
			var v any
			if err := dec.Decode(&v); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return // invalid YAML (or yaml.v3's own alias limit): not our concern
			}
			total += countValues(v)
		}
		if total > max(parsed, bombCeiling) {
			t.Fatalf("accepted a document decoding to %d values (parsed %d nodes)", total, parsed)
		}
	})
}

func countValues(v any) int64 {
	switch x := v.(type) {
	case map[string]any:
		n := int64(1)
		for _, e := range x {
			n += 1 + countValues(e)
		}
		return n
	case map[any]any:
		n := int64(1)
		for _, e := range x {
			n += 1 + countValues(e)
		}
		return n
	case []any:
		n := int64(1)
		for _, e := range x {
			n += countValues(e)
		}
		return n
	default:
		return 1
	}
}

// FuzzCheckDocuments: object validation never panics and only ever
// reports invalid objects.
func FuzzCheckDocuments(f *testing.F) {
	f.Add([]byte(configMap))
	f.Add([]byte(configMap + "---\n" + configMap))
	f.Add([]byte("---\n# Source: x/templates/a.yaml\napiVersion: v1\nkind: List\nitems:\n- kind: A\n"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 || ScanYAML(data) != nil {
			return
		}
		if err := checkDocuments("f.yaml", data, map[string]string{}); err != nil && !errors.Is(err, ErrInvalidObject) {
			t.Fatalf("unexpected error class: %v", err)
		}
	})
}
