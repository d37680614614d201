package sopsdecrypt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Redacted is the document with every encrypted value replaced by a
// RedactedPrefix marker and the sops metadata removed, in the document's
// format (a binary document becomes its marker): what the hub renders.
func (d *Document) Redacted() ([]byte, error) {
	return d.redact().emit()
}

func (d *Document) redact() *mapped {
	return d.mapLeaves(func(v any, _ []string) (any, error) {
		if s, ok := v.(string); ok && isEncrypted(s) {
			return redactedMarker(s), nil
		}
		return v, nil
	})
}

func redactedMarker(ciphertext string) string {
	sum := sha256.Sum256([]byte(ciphertext))
	return RedactedPrefix + hex.EncodeToString(sum[:])[:16]
}

// mapLeaves returns a copy of d with every leaf replaced by fn's result,
// walking in document order with sops' paths (mapping keys only). The
// first error fn returns stops the walk and is kept in the copy.
func (d *Document) mapLeaves(fn func(v any, path []string) (any, error)) *mapped {
	m := &mapped{doc: &Document{format: d.format, meta: d.meta}}
	for _, b := range d.branches {
		nb, _ := m.walk(b, nil, fn).(branch)
		m.doc.branches = append(m.doc.branches, nb)
	}
	return m
}

type mapped struct {
	doc *Document
	err error
}

func (m *mapped) walk(v any, p []string, fn func(any, []string) (any, error)) any {
	if m.err != nil {
		return nil
	}
	switch v := v.(type) {
	case branch:
		out := make(branch, 0, len(v))
		for _, it := range v {
			out = append(out, item{key: it.key, value: m.walk(it.value, append(p[:len(p):len(p)], it.key), fn)})
		}
		return out
	case []any:
		out := make([]any, 0, len(v))
		for _, e := range v {
			out = append(out, m.walk(e, p, fn))
		}
		return out
	case nil:
		return nil // sops neither encrypts nor MACs nulls
	}
	nv, err := fn(v, p)
	if err != nil {
		m.err = err
	}
	return nv
}

func (m *mapped) emit() ([]byte, error) {
	if m.err != nil {
		return nil, m.err
	}
	return m.doc.emit()
}

// emit encodes the (decrypted or redacted) document in its format.
func (d *Document) emit() ([]byte, error) {
	switch d.format {
	case YAML:
		var buf bytes.Buffer
		for i, b := range d.branches {
			if i > 0 {
				buf.WriteString("---\n")
			}
			out, err := yaml.Marshal(yamlNode(b))
			if err != nil {
				return nil, fmt.Errorf("encoding yaml: %w", err)
			}
			buf.Write(out)
		}
		return buf.Bytes(), nil
	case JSON:
		var buf bytes.Buffer
		if err := writeJSON(&buf, d.branches[0]); err != nil {
			return nil, err
		}
		var out bytes.Buffer
		if err := json.Indent(&out, buf.Bytes(), "", "\t"); err != nil {
			return nil, fmt.Errorf("encoding json: %w", err)
		}
		out.WriteByte('\n')
		return out.Bytes(), nil
	case Dotenv:
		var buf bytes.Buffer
		for _, it := range d.branches[0] {
			buf.WriteString(it.key)
			buf.WriteByte('=')
			buf.WriteString(strings.ReplaceAll(scalarString(it.value), "\n", `\n`))
			buf.WriteByte('\n')
		}
		return buf.Bytes(), nil
	case Binary:
		return []byte(scalarString(d.branches[0][0].value)), nil
	}
	return nil, fmt.Errorf("%w: unknown format %d", ErrUnsupported, d.format)
}

func scalarString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case nil:
		return ""
	}
	return string(toBytes(v))
}

func yamlNode(v any) *yaml.Node {
	switch v := v.(type) {
	case branch:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, it := range v {
			k := &yaml.Node{}
			_ = k.Encode(it.key) // a string always encodes
			n.Content = append(n.Content, k, yamlNode(it.value))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range v {
			n.Content = append(n.Content, yamlNode(e))
		}
		return n
	case []byte:
		return yamlNode(string(v))
	}
	n := &yaml.Node{}
	_ = n.Encode(v) // scalars always encode
	return n
}

func writeJSON(buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case branch:
		buf.WriteByte('{')
		for i, it := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(it.key)
			buf.Write(k)
			buf.WriteByte(':')
			if err := writeJSON(buf, it.value); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case []byte:
		v2, _ := json.Marshal(string(v))
		buf.Write(v2)
		return nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding json: %w", err)
	}
	buf.Write(out)
	return nil
}
