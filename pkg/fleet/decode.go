package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
	kjson "sigs.k8s.io/json"
)

// Limits that keep a broken or hostile document from exhausting the hub.
const (
	// MaxFileSize is the largest input document Load reads.
	MaxFileSize = 1 << 20
	// maxAliasNodes bounds the nodes alias expansion may add to a document
	// beyond those written out ("billion laughs").
	maxAliasNodes = 50_000
	// maxDepth bounds nesting; real documents stay far below it.
	maxDepth = 256
	// maxErrorsPerDocument keeps one broken file from flooding the report.
	maxErrorsPerDocument = 100
)

// errTooLarge aborts a conversion that exceeded a limit.
var errTooLarge = errors.New("limit exceeded")

// document is one parsed input file: its YAML tree (for lines) and the
// problems found in it.
type document struct {
	file string
	root *yaml.Node // the top-level mapping
	errs []*FieldError
	// dupReported avoids reporting an aliased mapping's duplicate key once
	// per use.
	// reported holds nodes already reported by a conversion, so that
	// converting a subtree again (or an aliased node once per use) reports
	// its problem once.
	reported  map[*yaml.Node]bool
	pairCache map[*yaml.Node][]pair
	// mergeWork counts pairs copied by merge keys; past maxMergeWork the
	// document is rejected.
	mergeWork     int
	mergeOverflow bool
	// data and lines describe the text while it is parsed, to correct
	// the lines yaml.v3 reports.
	data  []byte
	lines int
	// decodeErrs is how many of errs the decoding found; later ones come
	// from validation.
	decodeErrs int
}

func (d *document) add(line int, field string, class error, format string, args ...any) {
	if len(d.errs) >= maxErrorsPerDocument {
		return
	}
	d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Field: field, Kind: class, Detail: fmt.Sprintf(format, args...)})
}

// addOnce reports a problem of node n unless it was reported before.
func (d *document) addOnce(n *yaml.Node, field string, class error, format string, args ...any) {
	if d.reported[n] {
		return
	}
	if d.reported == nil {
		d.reported = map[*yaml.Node]bool{}
	}
	d.reported[n] = true
	d.add(n.Line, field, class, format, args...)
}

// errorf reports a problem at field, located in the document's tree. A
// problem whose field encloses one the decoder already reported (a
// destination with nothing set, because its only key was misspelt) is
// dropped: it is a consequence, and the decoder's message is the useful one.
func (d *document) errorf(field string, class error, format string, args ...any) {
	for _, e := range d.errs[:d.decodeErrs] {
		if e.Field != field && isUnder(e.Field, field) {
			return
		}
	}
	d.add(d.line(field), field, class, format, args...)
}

// isUnder reports whether field is parent or lies below it.
func isUnder(field, parent string) bool {
	if parent == "" || field == parent {
		return true
	}
	return strings.HasPrefix(field, parent) && (field[len(parent)] == '.' || field[len(parent)] == '[')
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseDocument parses exactly one YAML document whose top level is a
// mapping. Problems are recorded in the returned document; root is nil when
// nothing further can be checked.
func parseDocument(file string, data []byte) *document {
	d := &document{file: file}
	content := d.parseOne(data)
	if content == nil {
		return d
	}
	if content.Kind != yaml.MappingNode {
		d.add(content.Line, "", ErrInvalidValue, "the document must be a mapping, not a %s", nodeKindName(content))
		return d
	}
	d.root = content
	return d
}

// parseOne parses exactly one YAML document and returns its content node,
// or nil after recording why there is none.
func (d *document) parseOne(data []byte) (content *yaml.Node) {
	if len(data) > MaxFileSize {
		d.add(0, "", ErrSyntax, "%d bytes, more than the limit of %d", len(data), MaxFileSize)
		return nil
	}
	defer func() {
		// yaml.v3 has panicked on crafted input before; a bad file must
		// never take the hub down.
		if r := recover(); r != nil {
			content = nil
			d.add(0, "", ErrSyntax, "cannot parse YAML")
		}
	}()
	d.data = data
	d.lines = bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		d.lines++
	}
	defer func() { d.data = nil }()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.add(0, "", ErrRequired, "no YAML document")
			return nil
		}
		d.addYAMLError(err)
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.addYAMLError(err)
		return nil
	case !isEmptyDocument(&next):
		d.add(next.Line, "", ErrSyntax, "more than one YAML document; exactly one is allowed")
		return nil
	}
	if isEmptyDocument(&doc) {
		d.add(0, "", ErrRequired, "no YAML document")
		return nil
	}
	return doc.Content[0]
}

func isEmptyDocument(n *yaml.Node) bool {
	if n.Kind == 0 {
		return true
	}
	if n.Kind != yaml.DocumentNode || len(n.Content) == 0 {
		return n.Kind != yaml.DocumentNode
	}
	c := n.Content[0]
	return c.Kind == yaml.ScalarNode && c.ShortTag() == "!!null"
}

func (d *document) addYAMLError(err error) {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		for _, e := range te.Errors {
			d.addYAMLMessage(e)
		}
		return
	}
	d.addYAMLMessage(err.Error())
}

// yamlParserProblems are the problems yaml.v3's parser (as opposed to its
// scanner) reports. For these it prints a zero-based line (its scanner
// errors are one-based), so their line is corrected by one. The set is
// pinned with yaml.v3 by go.mod and guarded by TestYAMLSyntaxLines.
var yamlParserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

func (d *document) addYAMLMessage(msg string) {
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if yamlParserProblems[m[2]] {
			line++
		}
		// A problem found at the end of the stream is reported on the
		// line after the last one.
		if d.lines > 0 && line > d.lines {
			line = d.lines
		}
		d.add(line, "", ErrSyntax, "%s", m[2])
		return
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	// yaml.v3 names an unknown alias without its line; find it.
	line := 0
	if m := unknownAnchorRE.FindStringSubmatch(msg); m != nil {
		if i := bytes.Index(d.data, []byte("*"+m[1])); i >= 0 {
			line = bytes.Count(d.data[:i], []byte("\n")) + 1
		}
	}
	d.add(line, "", ErrSyntax, "%s", msg)
}

var unknownAnchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

func nodeKindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "null"
		}
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}

// pair is one key of a mapping after merge keys (<<) are applied.
type pair struct {
	key   string
	keyN  *yaml.Node
	value *yaml.Node
}

// maxMergeWork bounds the pairs copied while resolving merge keys, which
// can otherwise multiply like aliases do.
const maxMergeWork = 1_000_000

// mappingPairs returns a mapping's keys in order, merged keys first and
// overridden by explicit ones. Duplicate explicit keys are reported once
// and the first one wins. Results are cached per node.
func (d *document) mappingPairs(n *yaml.Node, path string) []pair {
	return d.pairs(n, path, 0)
}

func (d *document) pairs(n *yaml.Node, path string, depth int) []pair {
	if ps, ok := d.pairCache[n]; ok {
		return ps
	}
	var merged, explicit []pair
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			if depth < 10 {
				merged = append(merged, d.mergeSources(v, depth+1)...)
			}
			continue
		}
		key := k.Value
		if first, dup := seen[key]; dup {
			d.addOnce(k, joinPath(path, key), ErrSyntax, "duplicate key %q (first at line %d)", key, first.Line)
			continue
		}
		seen[key] = k
		explicit = append(explicit, pair{key: key, keyN: k, value: v})
	}
	out := explicit
	if len(merged) > 0 {
		out = nil
		for _, p := range merged {
			if _, ok := seen[p.key]; ok {
				continue
			}
			seen[p.key] = p.keyN
			out = append(out, p)
		}
		out = append(out, explicit...)
	}
	if d.pairCache == nil {
		d.pairCache = map[*yaml.Node][]pair{}
	}
	d.pairCache[n] = out
	return out
}

// mergeSources lists the pairs a merge key's value contributes; earlier
// mappings win over later ones, as the YAML merge key spec says.
func (d *document) mergeSources(v *yaml.Node, depth int) []pair {
	var maps []*yaml.Node
	add := func(n *yaml.Node) {
		if n = deref(n); n.Kind == yaml.MappingNode {
			maps = append(maps, n)
		}
	}
	if deref(v).Kind == yaml.SequenceNode {
		for _, c := range deref(v).Content {
			add(c)
		}
	} else {
		add(v)
	}
	var out []pair
	seen := map[string]bool{}
	for _, m := range maps {
		for _, p := range d.pairs(m, "", depth) {
			d.mergeWork++
			if d.mergeWork > maxMergeWork {
				d.mergeOverflow = true
				return out
			}
			if !seen[p.key] {
				seen[p.key] = true
				out = append(out, p)
			}
		}
	}
	return out
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

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
				c.d.add(k.Line, path, ErrSyntax, "a mapping key must be a scalar, not a %s", nodeKindName(k))
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

// decodeStrict decodes the subtree n, found at path, into out (a pointer)
// and reports unknown fields and type errors with their lines. It returns
// whether out was decoded at all (it may still be partial after a type
// error, which is reported).
func (d *document) decodeStrict(n *yaml.Node, path string, out any) bool {
	data, ok := d.toJSON(n, path)
	if !ok {
		return false
	}
	strict, err := kjson.UnmarshalStrict(data, out, kjson.DisallowUnknownFields)
	if err != nil {
		// The decoder stops at its first type error; walk the tree to
		// name each one with its own line.
		d.explain(n, reflect.TypeOf(out).Elem(), path, err)
		return true
	}
	d.addStrict(path, strict)
	return true
}

func (d *document) addStrict(path string, strict []error) {
	for _, e := range strict {
		var fe kjson.FieldError
		field := path
		if errors.As(e, &fe) {
			field = joinPath(path, fe.FieldPath())
		}
		d.errorf(field, ErrUnknownField, "not a field of this kind")
	}
}

var jsonUnmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// explain finds the fields under n that fail to decode into t and reports
// each; err is the failure of the whole subtree, reported at path when no
// smaller part explains it.
func (d *document) explain(n *yaml.Node, t reflect.Type, path string, err error) {
	n = deref(n)
	before := len(d.errs)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	custom := reflect.PointerTo(t).Implements(jsonUnmarshalerType)
	switch {
	case custom:
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := jsonFields(t)
		for _, p := range d.mappingPairs(n, path) {
			ft, ok := fields[p.key]
			if !ok {
				d.add(p.keyN.Line, joinPath(path, p.key), ErrUnknownField, "not a field of this kind")
				continue
			}
			d.explainChild(p.value, ft, joinPath(path, p.key))
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for _, p := range d.mappingPairs(n, path) {
			d.explainChild(p.value, t.Elem(), joinPath(path, p.key))
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			d.explainChild(item, t.Elem(), indexPath(path, i))
		}
	}
	if len(d.errs) == before {
		d.add(d.line(path), path, ErrInvalidValue, "%s", describeDecodeError(err, n))
	}
}

func (d *document) explainChild(n *yaml.Node, t reflect.Type, path string) {
	data, ok := d.toJSON(n, path)
	if !ok {
		return
	}
	strict, err := kjson.UnmarshalStrict(data, reflect.New(t).Interface(), kjson.DisallowUnknownFields)
	if err != nil {
		d.explain(n, t, path, err)
		return
	}
	d.addStrict(path, strict)
}

func describeDecodeError(err error, n *yaml.Node) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("expected %s, got %s", typeName(te.Type), nodeValueName(n))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return msg
}

func nodeValueName(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return "a string"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		}
		return "a scalar"
	}
	return "a " + nodeKindName(n)
}

func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return t.String()
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields maps the JSON names of a struct's fields, embedded structs
// flattened, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if name == "-" && tag == "-" {
				continue
			}
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct && depth < 5 {
					walk(ft, depth+1)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := m[name]; !dup {
				m[name] = f.Type
			}
		}
	}
	walk(t, 0)
	fieldCache.Store(t, m)
	return m
}

// line returns the line of the field at path (a key's line for a mapping
// entry, an item's line for a list index), or of its nearest existing
// ancestor when the field is absent.
func (d *document) line(path string) int {
	line, _, _ := d.lookup(path)
	return line
}

// lookup walks path (e.g. spec.syncPolicies[1].destination.fleet) and
// returns the line reached, the node, and whether the whole path exists.
// Keys may themselves contain dots (label keys); the longest key that fits
// is taken.
func (d *document) lookup(path string) (int, *yaml.Node, bool) {
	if d.root == nil {
		return 0, nil, false
	}
	n := d.root
	line := n.Line
	rest := path
	for steps := 0; rest != "" && steps < 1000; steps++ {
		n = deref(n)
		if rest[0] == '[' {
			end := strings.IndexByte(rest, ']')
			if end < 0 || n.Kind != yaml.SequenceNode {
				return line, n, false
			}
			i, err := strconv.Atoi(rest[1:end])
			if err != nil || i < 0 || i >= len(n.Content) {
				return line, n, false
			}
			n = n.Content[i]
			line = n.Line
			rest = rest[end+1:]
			continue
		}
		rest = strings.TrimPrefix(rest, ".")
		if n.Kind != yaml.MappingNode {
			return line, n, false
		}
		var best *pair
		pairs := d.mappingPairs(n, "")
		for i := range pairs {
			k := pairs[i].key
			if strings.HasPrefix(rest, k) && (len(rest) == len(k) || rest[len(k)] == '.' || rest[len(k)] == '[') {
				if best == nil || len(k) > len(best.key) {
					best = &pairs[i]
				}
			}
		}
		if best == nil {
			return line, n, false
		}
		line = best.keyN.Line
		n = best.value
		rest = rest[len(best.key):]
	}
	return line, n, rest == ""
}

// has reports whether the field at path is written in the document.
func (d *document) has(path string) bool {
	_, _, ok := d.lookup(path)
	return ok
}

// header reads apiVersion, kind and metadata.name as written, before the
// typed decode, so a document of the wrong kind is reported once rather
// than as a list of unknown fields.
func (d *document) header() (apiVersion, kind string) {
	str := func(path string) string {
		_, n, ok := d.lookup(path)
		if !ok || deref(n).Kind != yaml.ScalarNode {
			return ""
		}
		return deref(n).Value
	}
	return str("apiVersion"), str("kind")
}

// sortErrors orders problems by file, line, field and text.
func sortErrors(errs []*FieldError) {
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i], errs[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Error() < b.Error()
	})
}
