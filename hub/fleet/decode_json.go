package fleet

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// converter turns a YAML tree into JSON, expanding aliases within a budget.
type converter struct {
	d        *document
	buf      bytes.Buffer
	budget   int
	inFlight map[*yaml.Node]bool
}

// toJSON converts n. Problems that still leave a usable JSON value (a
// duplicate key: the first wins) are reported and conversion goes on; a
// limit violation is reported and returns ok=false.
func (d *document) toJSON(n *yaml.Node, path string) (data []byte, ok bool) {
	c := &converter{d: d, budget: countNodes(n, 0) + maxAliasNodes, inFlight: map[*yaml.Node]bool{}}
	if err := c.node(n, path, 0); err != nil {
		return nil, false
	}
	if d.mergeOverflow {
		d.add(n.Line, path, ErrSyntax, "merge keys (<<) expand to more than %d entries", maxMergeWork)
		return nil, false
	}
	return c.buf.Bytes(), true
}

// countNodes counts the nodes written out, not following aliases.
func countNodes(n *yaml.Node, depth int) int {
	if n == nil || depth > maxDepth {
		return 0
	}
	total := 1
	for _, c := range n.Content {
		total += countNodes(c, depth+1)
	}
	return total
}

func (c *converter) node(n *yaml.Node, path string, depth int) error {
	c.budget--
	if c.budget < 0 {
		c.d.add(n.Line, path, ErrSyntax, "aliases expand to more than %d extra nodes", maxAliasNodes)
		return errTooLarge
	}
	if depth > maxDepth {
		c.d.add(n.Line, path, ErrSyntax, "nested deeper than %d levels", maxDepth)
		return errTooLarge
	}
	if n.Anchor != "" && n.Kind != yaml.AliasNode {
		// An alias met while its anchor is still being converted points
		// at an ancestor.
		c.inFlight[n] = true
		defer delete(c.inFlight, n)
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			c.d.add(n.Line, path, ErrSyntax, "unknown alias")
			return errTooLarge
		}
		if c.inFlight[n.Alias] {
			c.d.add(n.Line, path, ErrSyntax, "alias *%s refers to itself", n.Value)
			return errTooLarge
		}
		return c.node(n.Alias, path, depth+1)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			c.buf.WriteString("null")
			return nil
		}
		return c.node(n.Content[0], path, depth+1)
	case yaml.MappingNode:
		c.buf.WriteByte('{')
		for i, p := range c.d.mappingPairs(n, path) {
			k := deref(p.keyN)
			if k.Kind != yaml.ScalarNode {
				c.d.add(k.Line, path, ErrSyntax, "a mapping key must be a scalar, not %s", withArticle(nodeKindName(k)))
				return errTooLarge
			}
			if i > 0 {
				c.buf.WriteByte(',')
			}
			writeJSONString(&c.buf, p.key)
			c.buf.WriteByte(':')
			if err := c.node(p.value, joinPath(path, p.key), depth+1); err != nil {
				return err
			}
		}
		c.buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		c.buf.WriteByte('[')
		for i, item := range n.Content {
			if i > 0 {
				c.buf.WriteByte(',')
			}
			if err := c.node(item, indexPath(path, i), depth+1); err != nil {
				return err
			}
		}
		c.buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		return c.scalar(n, path)
	}
	c.d.add(n.Line, path, ErrSyntax, "unexpected YAML node")
	return errTooLarge
}

func (c *converter) scalar(n *yaml.Node, path string) error {
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!timestamp", "!!binary", "!!merge":
		writeJSONString(&c.buf, n.Value)
	case "!!null":
		c.buf.WriteString("null")
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			c.d.addOnce(n, path, ErrInvalidValue, "%s is not a valid %s", strconv.Quote(n.Value), strings.TrimPrefix(tag, "!!"))
			c.buf.WriteString("null")
			return nil
		}
		if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			c.d.addOnce(n, path, ErrInvalidValue, "%s is not a finite number", n.Value)
			c.buf.WriteString("null")
			return nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			c.d.addOnce(n, path, ErrInvalidValue, "%s cannot be represented in JSON", strconv.Quote(n.Value))
			c.buf.WriteString("null")
			return nil
		}
		c.buf.Write(b)
	default:
		c.d.addOnce(n, path, ErrSyntax, "unsupported tag %s", tag)
		c.buf.WriteString("null")
	}
	return nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a Go string always marshals
	b.Write(enc)
}
