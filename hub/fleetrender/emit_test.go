package fleetrender

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	yamlv3 "gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// parseBoth reads YAML as kustomize (yaml.v3) and Helm (sigs.k8s.io/yaml,
// YAML 1.1) would, as JSON-compatible trees.
func parseBoth(t *testing.T, data []byte) (any, any) {
	t.Helper()
	var v3 any
	if err := yamlv3.Unmarshal(data, &v3); err != nil {
		t.Fatalf("yaml.v3: %v\n%s", err, data)
	}
	j, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("sigs.k8s.io/yaml: %v\n%s", err, data)
	}
	var v1 any
	if err := json.Unmarshal(j, &v1); err != nil {
		t.Fatal(err)
	}
	return v3, v1
}

// FuzzEmitString: any string, as a value, a list item and a key, reads back
// unchanged with both parsers.
func FuzzEmitString(f *testing.F) {
	for _, s := range []string{"", "a", "true", "yes", "~", "null", "1", "1e5", "0x1F", "256Mi", "5m0s", "12:30",
		"2001-12-14", "a: b", "- x", "#c", "line\nbreak\n", "  indented\nx", "trailing \nx", "x\n\n\n", "tab\there",
		"\x00", "é", "\u2028", "'q'", `"d"`, "../../apps", ".inf", "<<", "=", "!tag", "&a", "*a", "%x", "@x", "`x", "|", ">", "{", "[", "?", ",x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8Valid(s) {
			return // generated strings come from UTF-8 YAML or JSON
		}
		doc := orderedMap{{"k", s}, {"l", []any{s, "x"}}, {"m", map[string]any{s: s}}, {"n", orderedMap{{"patch", s}}}}
		data, err := marshalDocs(doc)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"k": s, "l": []any{s, "x"}, "m": map[string]any{s: s}, "n": map[string]any{"patch": s}}
		v3, v1 := parseBoth(t, data)
		if !reflect.DeepEqual(v3, want) {
			t.Fatalf("yaml.v3 read %#v, want %#v from\n%s", v3, want, data)
		}
		if !reflect.DeepEqual(v1, want) {
			t.Fatalf("sigs.k8s.io/yaml read %#v, want %#v from\n%s", v1, want, data)
		}
	})
}

func utf8Valid(s string) bool {
	return strings.ToValidUTF8(s, "\uFFFD") == s
}

// TestEmitValues: numbers, booleans, null, nesting and empty collections
// read back as the same JSON with both parsers.
func TestEmitValues(t *testing.T) {
	raw := `{"a":1,"b":1.5,"c":1e21,"d":-0.0001,"e":true,"f":null,"g":[],"h":{},"i":[[1,[2]],{"x":[{}]}],
	"j":{"k":{"l":"m"}},"n":"multi\nline\n","o":123456789012345678,"p":"1.0","q":[{"r":1,"s":[true]}]}`
	v, err := decodeValues(&runtime.RawExtension{Raw: []byte(raw)})
	if err != nil {
		t.Fatal(err)
	}
	data, err := marshalValues(v)
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal([]byte(raw), &want); err != nil {
		t.Fatal(err)
	}
	v3, v1 := parseBoth(t, data)
	// Compare as JSON numbers (float64): yaml.v3 yields ints.
	norm := func(x any) any {
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := norm(v3); !reflect.DeepEqual(got, want) {
		t.Errorf("yaml.v3 read %v, want %v from\n%s", got, want, data)
	}
	if got := norm(v1); !reflect.DeepEqual(got, want) {
		t.Errorf("sigs.k8s.io/yaml read %v, want %v from\n%s", got, want, data)
	}
	if !strings.HasPrefix(string(data), slice.GeneratedHeader+"\n") {
		t.Errorf("no header")
	}
}
