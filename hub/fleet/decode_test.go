package fleet

import (
	"errors"
	"strings"
	"testing"
)

const clusterHead = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: x\n"

// TestDecodeDocument pins how single documents decode: YAML features that
// are honoured, and the exact message for each kind of bad input.
func TestDecodeDocument(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // every problem, in order; empty for a clean decode
		// check inspects a clean decode.
		check func(t *testing.T, c *Cluster)
	}{
		{
			name: "merge keys and aliases",
			doc:  clusterHead + "  labels: &l {a: b}\n  annotations:\n    <<: *l\n    c: d\n",
			check: func(t *testing.T, c *Cluster) {
				if c.Metadata.Annotations["a"] != "b" || c.Metadata.Annotations["c"] != "d" || c.Metadata.Labels["a"] != "b" {
					t.Errorf("metadata = %+v", c.Metadata)
				}
			},
		},
		{
			name: "timestamps stay strings",
			doc:  clusterHead + "  labels: {since: 2001-12-14}\n",
			check: func(t *testing.T, c *Cluster) {
				if c.Metadata.Labels["since"] != "2001-12-14" {
					t.Errorf("since = %q", c.Metadata.Labels["since"])
				}
			},
		},
		{
			name: "alias to an ancestor",
			doc:  clusterHead + "spec: &s\n  apiVersions: [*s]\n",
			want: []string{"f.yaml:6: spec.apiVersions[0]: syntax error: alias *s refers to itself"},
		},
		{
			name: "unknown alias",
			doc:  clusterHead + "  labels: *nope\n",
			want: []string{"f.yaml:5: syntax error: unknown anchor 'nope' referenced"},
		},
		{
			name: "non-finite number and custom tag",
			doc:  clusterHead + "  labels: {f: .inf, t: !foo x}\n",
			want: []string{
				"f.yaml:5: metadata.labels.f: invalid value: .inf is not a finite number",
				"f.yaml:5: metadata.labels.t: syntax error: unsupported tag !foo",
			},
		},
		{
			name: "every type error, each on its line",
			doc:  clusterHead + "spec:\n  capacity: {cpu: lots}\n  apiVersions: [1, {a: b}]\n  kubernetesVersion: [x]\n  bogus: 1\n",
			want: []string{
				"f.yaml:6: spec.capacity.cpu: invalid value: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
				"f.yaml:7: spec.apiVersions[0]: invalid value: expected a string, got a number",
				"f.yaml:7: spec.apiVersions[1]: invalid value: expected a string, got a mapping",
				"f.yaml:8: spec.kubernetesVersion: invalid value: expected a string, got a list",
				"f.yaml:9: spec.bogus: unknown field: not a field of this kind",
			},
		},
		{
			name: "complex key",
			doc:  clusterHead + "  [a]: b\n",
			want: []string{"f.yaml:5: metadata: syntax error: a mapping key must be a scalar, not a list"},
		},
		{
			name: "not a mapping",
			doc:  "- a\n",
			want: []string{"f.yaml:1: invalid value: the document must be a mapping, not a list"},
		},
		{
			name: "empty",
			doc:  "# only a comment\n",
			want: []string{"f.yaml: required field missing: no YAML document"},
		},
		{
			name: "missing header",
			doc:  "metadata:\n  name: x\n",
			want: []string{
				"f.yaml:1: apiVersion: required field missing: must be flotilla.dev/v1alpha1",
				"f.yaml:1: kind: required field missing: must be Cluster here",
			},
		},
		{
			name: "missing name",
			doc:  "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  labels: {a: b}\n",
			want: []string{`f.yaml:3: metadata.name: required field missing: must be "x", the file name`},
		},
		{
			name: "trailing document separator is fine",
			doc:  clusterHead + "---\n",
		},
		{
			name: "deep nesting",
			doc:  clusterHead + "spec:\n  capacity: " + strings.Repeat("[", 300) + strings.Repeat("]", 300) + "\n",
			want: []string{"f.yaml:6: spec.capacity" + strings.Repeat("[0]", 255) + ": syntax error: nested deeper than 256 levels"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, obj, ok := decodeDocument("f.yaml", []byte(tc.doc), KindCluster, "x")
			var got []string
			for _, e := range d.errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if len(tc.want) == 0 {
				if !ok || obj == nil {
					t.Fatal("clean document not decoded")
				}
				if tc.check != nil {
					tc.check(t, obj.(*Cluster))
				}
			} else if ok {
				t.Fatal("bad document reported as decoded")
			}
		})
	}
}

// TestYAMLSyntaxLines guards the line correction for yaml.v3's parser
// errors (zero-based) against its scanner errors (one-based).
func TestYAMLSyntaxLines(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string
	}{
		{"a: 1\nb: [1,\n  2\nc: 3\n", "f.yaml:2: syntax error: did not find expected ',' or ']'"},
		{"a: 1\n- b\n", "f.yaml:2: syntax error: did not find expected key"},
		{"a: 1\nb:\n  c: 1\n d: 2\n", "f.yaml:4: syntax error: did not find expected key"},
		{"a: 1\nb:\n  - x\n  y: 2\n", "f.yaml:3: syntax error: did not find expected '-' indicator"},
		{"a: 1\nb: {\n", "f.yaml:2: syntax error: did not find expected node content"},
		{"a: 1\nb: 2\n  c: 3\n", "f.yaml:3: syntax error: mapping values are not allowed in this context"},
		{"a: 1\n\n\nkey: @x\n", "f.yaml:4: syntax error: found character that cannot start any token"},
		{"a: 1\nb: \"open\nc: 3\n", "f.yaml:2: syntax error: found unexpected end of stream"},
		{"a:\n\tb: c\n", "f.yaml:2: syntax error: found character that cannot start any token"},
	} {
		d := parseDocument("f.yaml", []byte(tc.doc))
		if len(d.errs) != 1 || d.errs[0].Error() != tc.want || !errors.Is(d.errs[0], ErrSyntax) {
			t.Errorf("%q: got %v, want %s", tc.doc, d.errs, tc.want)
		}
	}
}
