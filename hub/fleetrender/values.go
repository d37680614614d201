package fleetrender

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/runtime"
)

// decodeValues turns Helm values as loaded (JSON, or YAML if a caller built
// the RawExtension by hand) into a tree of map[string]any, []any and
// scalars; numbers from JSON stay json.Number so they are written back
// unchanged.
func decodeValues(raw *runtime.RawExtension) (map[string]any, error) {
	if raw == nil || len(bytes.TrimSpace(raw.Raw)) == 0 {
		return nil, nil
	}
	data := bytes.TrimSpace(raw.Raw)
	var v any
	if data[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("decode values: %w", err)
		}
	} else if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("decode values: %w", err)
	}
	switch m := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return m, nil
	default:
		return nil, fmt.Errorf("values must be a mapping, not %T", v)
	}
}

// mergeValues deep-merges over onto base as Helm merges several values
// files: mappings merge key by key, anything else (lists, scalars, null)
// replaces. Neither input is modified.
func mergeValues(base, over map[string]any) map[string]any {
	if base == nil {
		return over
	}
	if over == nil {
		return base
	}
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = mergeValues(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// usesClusterVars reports whether s refers to a cluster variable
// (${cluster.name}, ${cluster.labels.<key>}); units without any are shared
// by every cluster with the same policies.
func usesClusterVars(s string) bool {
	return strings.Contains(s, "${cluster.")
}

// valuesUseVars reports whether any string in the tree refers to a cluster
// variable.
func valuesUseVars(v any) bool {
	switch t := v.(type) {
	case string:
		return usesClusterVars(t)
	case map[string]any:
		for _, e := range t {
			if valuesUseVars(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if valuesUseVars(e) {
				return true
			}
		}
	}
	return false
}

// expandTree returns a copy of the tree with expand applied to every
// string, passing each leaf's field path; subtrees without cluster
// variables are shared, not copied.
func expandTree(v any, field string, expand func(s, field string) string) any {
	switch t := v.(type) {
	case string:
		return expand(t, field)
	case map[string]any:
		if !valuesUseVars(t) {
			return t
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = expandTree(e, joinField(field, k), expand)
		}
		return out
	case []any:
		if !valuesUseVars(t) {
			return t
		}
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = expandTree(e, field+"["+strconv.Itoa(i)+"]", expand)
		}
		return out
	default:
		return v
	}
}

// joinField appends a map key to a field path, quoting keys that are not
// simple identifiers.
func joinField(field, key string) string {
	simple := key != ""
	for _, c := range key {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			simple = false
			break
		}
	}
	if simple {
		return field + "." + key
	}
	return field + "[" + strconv.Quote(key) + "]"
}

// marshalValues writes values.yaml.
func marshalValues(v map[string]any) ([]byte, error) {
	if v == nil {
		v = map[string]any{}
	}
	return marshalDocs(v)
}
