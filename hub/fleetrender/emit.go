package fleetrender

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// The generated files are small and written by the hundred thousand at fleet
// scale, so they are emitted by hand rather than by a reflective YAML
// library (which dominated the compile time): slice.yaml field by field,
// the others from a small tree (ordered maps for fixed documents, sorted
// keys for Helm values). Scalars are plain only when every YAML 1.1 and 1.2
// parser reads them back as the same string, multi-line strings are literal
// blocks when that is exact, anything else is double-quoted. The bytes
// depend only on the input.

// orderedMap is a mapping written in its own order (documents with a
// conventional field order); map[string]any is written with sorted keys.
type orderedMap []field

type field struct {
	key   string
	value any
}

// add appends key: value unless value is nil or an empty string.
func (m orderedMap) add(key string, value any) orderedMap {
	switch v := value.(type) {
	case nil:
		return m
	case string:
		if v == "" {
			return m
		}
	}
	return append(m, field{key, value})
}

// stringMap converts labels or annotations for the emitter; nil when empty.
func stringMap(m map[string]string) any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// marshalDocs writes the generated header and each value as one YAML
// document, separated by "---".
func marshalDocs(docs ...any) ([]byte, error) {
	e := &emitter{}
	e.b.WriteString(slice.GeneratedHeader)
	e.b.WriteByte('\n')
	for i, d := range docs {
		if i > 0 {
			e.b.WriteString("---\n")
		}
		if err := e.top(d); err != nil {
			return nil, err
		}
	}
	return e.b.Bytes(), nil
}

type emitter struct {
	b bytes.Buffer
}

func (e *emitter) top(v any) error {
	switch {
	case isEmpty(v):
		text, _ := emptyText(v)
		e.b.WriteString(text)
		e.b.WriteByte('\n')
		return nil
	case isMapping(v):
		return e.mapping(v, 0, false)
	case isSequence(v):
		return e.sequence(v.([]any), 0)
	default:
		return e.scalarLine(v, 0)
	}
}

func isMapping(v any) bool {
	switch v.(type) {
	case map[string]any, orderedMap:
		return true
	}
	return false
}

func isSequence(v any) bool {
	_, ok := v.([]any)
	return ok
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) == 0
	case orderedMap:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

func emptyText(v any) (string, bool) {
	switch v.(type) {
	case map[string]any, orderedMap:
		return "{}", true
	case []any:
		return "[]", true
	}
	return "", false
}

func entries(v any) orderedMap {
	switch t := v.(type) {
	case orderedMap:
		return t
	case map[string]any:
		out := make(orderedMap, 0, len(t))
		for _, k := range sortedKeys(t) {
			out = append(out, field{k, t[k]})
		}
		return out
	}
	return nil
}

// mapping writes a non-empty mapping at indent; when inline, the first key
// continues the current line (a sequence item's "- ").
// maxImplicitKey is the longest key YAML allows without "? ".
const maxImplicitKey = 1024

func (e *emitter) mapping(v any, indent int, inline bool) error {
	for i, f := range entries(v) {
		if i > 0 || !inline {
			e.indent(indent)
		}
		key := slice.QuoteScalar(f.key)
		if utf8.RuneCountInString(key) > maxImplicitKey {
			// YAML limits an implicit key to 1024 characters: a longer one
			// is written as an explicit key ("? key" then ": value").
			e.b.WriteString("? ")
			e.b.WriteString(key)
			e.b.WriteByte('\n')
			e.indent(indent)
		} else {
			e.b.WriteString(key)
		}
		e.b.WriteByte(':')
		if err := e.value(f.value, indent, indent+2); err != nil {
			return fmt.Errorf("%s: %w", f.key, err)
		}
	}
	return nil
}

func (e *emitter) sequence(items []any, indent int) error {
	for i, it := range items {
		e.indent(indent)
		e.b.WriteByte('-')
		if err := e.value(it, indent, indent+2); err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
	}
	return nil
}

// value writes what follows "key:" or "-": a nested block, or a scalar
// and the line end. seqIndent is where a nested sequence's dashes go, inner
// where nested mappings and block scalar lines go.
func (e *emitter) value(v any, seqIndent, inner int) error {
	if text, ok := emptyText(v); ok && isEmpty(v) {
		e.b.WriteByte(' ')
		e.b.WriteString(text)
		e.b.WriteByte('\n')
		return nil
	}
	switch t := v.(type) {
	case map[string]any, orderedMap:
		if e.afterDash() {
			e.b.WriteByte(' ')
			return e.mapping(t, inner, true)
		}
		e.b.WriteByte('\n')
		return e.mapping(t, inner, false)
	case []any:
		nested := e.afterDash()
		e.b.WriteByte('\n')
		if nested {
			return e.sequence(t, inner)
		}
		return e.sequence(t, seqIndent)
	case string:
		if header, lines, ok := literalBlock(t); ok {
			e.b.WriteByte(' ')
			e.b.WriteString(header)
			e.b.WriteByte('\n')
			for _, l := range lines {
				if l != "" {
					e.indent(inner)
					e.b.WriteString(l)
				}
				e.b.WriteByte('\n')
			}
			return nil
		}
	}
	e.b.WriteByte(' ')
	return e.scalarLine(v, 0)
}

// afterDash reports whether the current line ends with a sequence dash.
func (e *emitter) afterDash() bool {
	b := e.b.Bytes()
	return len(b) > 0 && b[len(b)-1] == '-'
}

func (e *emitter) scalarLine(v any, indent int) error {
	text, err := scalarText(v)
	if err != nil {
		return err
	}
	e.indent(indent)
	e.b.WriteString(text)
	e.b.WriteByte('\n')
	return nil
}

func (e *emitter) indent(n int) {
	for i := 0; i < n; i++ {
		e.b.WriteByte(' ')
	}
}

// scalarText is the YAML text of a scalar.
func scalarText(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "null", nil
	case string:
		return slice.QuoteScalar(t), nil
	case bool:
		return strconv.FormatBool(t), nil
	case int:
		return strconv.Itoa(t), nil
	case int32:
		return strconv.FormatInt(int64(t), 10), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case uint64:
		return strconv.FormatUint(t, 10), nil
	case float64:
		return formatFloat(t), nil
	case jsonNumber:
		return numberText(t.String())
	default:
		return "", fmt.Errorf("unsupported value type %T", v)
	}
}

type jsonNumber interface{ String() string }

// numberText writes a JSON number so YAML 1.1 parsers (Helm's) and 1.2
// parsers read the same number: integers as written, other numbers with a
// decimal point and a signed exponent.
func numberText(s string) (string, error) {
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return s, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "", fmt.Errorf("invalid number %q", s)
	}
	return formatFloat(f), nil
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	case math.IsNaN(f):
		return ".nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	mant, exp, hasExp := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	if !hasExp {
		return mant
	}
	if exp[0] != '+' && exp[0] != '-' {
		exp = "+" + exp
	}
	return mant + "e" + exp
}

// literalBlock returns the header ("|", "|-" or "|+") and lines of s as a
// literal block scalar, when that represents s exactly and plainly: it has a
// line break, only printable characters and tabs, no carriage return, no
// line that is only or ends with whitespace, no leading space.
func literalBlock(s string) (string, []string, bool) {
	if !strings.Contains(s, "\n") || strings.HasPrefix(s, " ") || strings.HasPrefix(s, "\t") {
		return "", nil, false
	}
	for _, r := range s {
		if r == '\n' || r == '\t' {
			continue
		}
		if r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 || r == 0xfeff || !unicode.IsPrint(r) && r != ' ' {
			return "", nil, false
		}
	}
	body := strings.TrimRight(s, "\n")
	trailing := len(s) - len(body)
	header := "|"
	switch {
	case trailing == 0:
		header = "|-"
	case trailing > 1:
		header = "|+"
	}
	lines := strings.Split(body, "\n")
	for _, l := range lines {
		if strings.HasSuffix(l, " ") || strings.HasSuffix(l, "\t") {
			return "", nil, false
		}
	}
	if lines[0] == "" {
		return "", nil, false // a leading empty line: keep it simple, quote
	}
	for i := 1; i < trailing; i++ {
		lines = append(lines, "")
	}
	return header, lines, true
}
