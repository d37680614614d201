package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
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
		d.add(content.Line, "", ErrInvalidValue, "the document must be a mapping, not %s", withArticle(nodeKindName(content)))
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

// SyntaxError locates err, a yaml.v3 error decoding data (the content of
// file), as the loader does — correcting the lines of yaml.v3's parser
// errors — for other readers of YAML input such as importers.
func SyntaxError(file string, data []byte, err error) *FieldError {
	d := &document{file: file, data: data, lines: bytes.Count(data, []byte("\n"))}
	d.addYAMLError(err)
	if len(d.errs) == 0 {
		return &FieldError{File: file, Kind: ErrSyntax, Detail: err.Error()}
	}
	return d.errs[0]
}
