package fleet

import (
	"strings"

	"gopkg.in/yaml.v3"
)

// FieldLines maps field paths (spec.rules[0].cel.expression) to the line
// each is written on. Generators that find problems after loading — a CEL
// expression compiled at render time, a ServiceAccount namespace a cluster
// lacks — use it to name the line like Load does.
type FieldLines map[string]int

// maxFieldLines bounds the paths recorded per document; aliases are not
// followed, so real documents stay far below it.
const maxFieldLines = 20_000

// Line returns the line of field, or of its nearest enclosing field that is
// written; 0 when nothing is known.
func (l FieldLines) Line(field string) int {
	for f := field; ; f = parentField(f) {
		if n, ok := l[f]; ok {
			return n
		}
		if f == "" {
			return 0
		}
	}
}

// parentField strips the last ".key" or "[i]" of a field path.
func parentField(f string) string {
	i := strings.LastIndexAny(f, ".[")
	if i < 0 {
		return ""
	}
	return f[:i]
}

// fieldLines records the line of every field under path in the document
// (the whole document for path ""). Aliases are not followed: a field
// reached through one is reported at the alias.
func (d *document) fieldLines(path string) FieldLines {
	if d.root == nil {
		return nil
	}
	line, n, ok := d.lookup(path)
	if !ok {
		return nil
	}
	out := FieldLines{path: line}
	if path == "" {
		out[""] = d.root.Line
	}
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		if n == nil || n.Kind == yaml.AliasNode || depth > maxDepth || len(out) >= maxFieldLines {
			return
		}
		switch n.Kind {
		case yaml.MappingNode:
			for _, p := range d.mappingPairs(n, path) {
				f := joinPath(path, p.key)
				if _, seen := out[f]; !seen {
					out[f] = p.keyN.Line
				}
				walk(p.value, f, depth+1)
			}
		case yaml.SequenceNode:
			for i, item := range n.Content {
				f := indexPath(path, i)
				out[f] = item.Line
				walk(item, f, depth+1)
			}
		}
	}
	walk(n, path, 0)
	return out
}

// recordLines keeps the lines generators need after loading: every field
// of an application, route or policy, and a fleet's workload identities.
func recordLines(d *document, obj any) {
	switch o := obj.(type) {
	case *Application:
		o.Lines = d.fieldLines("")
	case *TrafficRoute:
		o.Lines = d.fieldLines("")
	case *FleetPolicy:
		o.Lines = d.fieldLines("")
	case *Fleet:
		o.Lines = d.fieldLines("spec.workloadIdentity")
	}
}
