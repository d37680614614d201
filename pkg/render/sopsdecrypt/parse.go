package sopsdecrypt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// parseYAML loads every document as sops' YAML store does: mappings in
// order, aliases resolved, scalars decoded by yaml.v3, comments dropped.
func parseYAML(data []byte) (*Document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first yaml.Node
	if err := dec.Decode(&first); err != nil {
		return nil, nil //nolint:nilerr // not YAML: the caller's parser reports it
	}
	// sops writes its metadata into the first document; a file without it
	// is not a SOPS document, whatever its later documents hold (a Helm
	// template, say).
	metaNode := sopsSection(&first)
	if metaNode == nil {
		return nil, nil
	}
	docs := []*yaml.Node{&first}
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, malformed("yaml: %s", firstLine(err.Error()))
		}
		docs = append(docs, &n)
	}
	d := &Document{format: YAML}
	if err := metaNode.Decode(&d.meta); err != nil {
		return nil, malformed("sops metadata: %s", firstLine(err.Error()))
	}
	if d.meta.MAC == "" {
		return nil, nil
	}
	budget := maxNodes
	for _, doc := range docs {
		b, err := yamlBranch(doc, &budget)
		if err != nil {
			return nil, err
		}
		d.branches = append(d.branches, dropSops(b))
	}
	if err := d.checkIdentity(); err != nil {
		return nil, err
	}
	return d, nil
}

// checkIdentity refuses a Kubernetes manifest whose apiVersion, kind or
// metadata is encrypted: the hub, which has no key, must still see which
// object the file is to render and plan it (encrypt with
// encrypted_regex: ^(data|stringData)$, as Flux recommends).
func (d *Document) checkIdentity() error {
	for _, b := range d.branches {
		if b.get("kind") == nil && b.get("apiVersion") == nil {
			continue // not a manifest: a generator's input, say
		}
		for _, k := range []string{"apiVersion", "kind", "metadata"} {
			if containsEncrypted(b.get(k)) {
				return fmt.Errorf("%w: the manifest's %s is encrypted; encrypt only data and stringData (encrypted_regex: ^(data|stringData)$) so that render and plan can tell which object it is", ErrUnsupported, k)
			}
		}
	}
	return nil
}

func (b branch) get(key string) any {
	for _, it := range b {
		if it.key == key {
			return it.value
		}
	}
	return nil
}

func containsEncrypted(v any) bool {
	switch v := v.(type) {
	case string:
		return isEncrypted(v)
	case branch:
		for _, it := range v {
			if containsEncrypted(it.value) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if containsEncrypted(e) {
				return true
			}
		}
	}
	return false
}

// sopsSection is the value of a document's top-level "sops" key, if it is
// a mapping.
func sopsSection(doc *yaml.Node) *yaml.Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "sops" && m.Content[i+1].Kind == yaml.MappingNode {
			return m.Content[i+1]
		}
	}
	return nil
}

func dropSops(b branch) branch {
	out := b[:0:0]
	for _, it := range b {
		if it.key != "sops" {
			out = append(out, it)
		}
	}
	return out
}

func yamlBranch(doc *yaml.Node, budget *int) (branch, error) {
	if len(doc.Content) == 0 {
		return branch{}, nil
	}
	n := doc.Content[0]
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		v, err := yamlValue(n, 0, budget)
		if err != nil {
			return nil, err
		}
		return v.(branch), nil
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return branch{}, nil
		}
	}
	return nil, malformed("a yaml document must be a mapping")
}

// maxDepth and maxNodes bound the work on hostile input: nesting, and
// the values aliases expand to (render also scans every file for alias
// bombs before this runs).
const (
	maxDepth = 100
	maxNodes = 1 << 20
)

func yamlValue(n *yaml.Node, depth int, budget *int) (any, error) {
	if depth > maxDepth {
		return nil, malformed("nesting deeper than %d", maxDepth)
	}
	if *budget--; *budget < 0 {
		return nil, malformed("aliases expand to more than %d values", maxNodes)
	}
	switch n.Kind {
	case yaml.AliasNode:
		return yamlValue(n.Alias, depth+1, budget)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := yamlValue(c, depth+1, budget)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(branch, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			var k any
			if err := n.Content[i].Decode(&k); err != nil {
				return nil, malformed("line %d: key: %s", n.Content[i].Line, firstLine(err.Error()))
			}
			ks, ok := k.(string)
			if !ok {
				return nil, malformed("line %d: keys must be strings", n.Content[i].Line)
			}
			v, err := yamlValue(n.Content[i+1], depth+1, budget)
			if err != nil {
				return nil, err
			}
			out = append(out, item{key: ks, value: v})
		}
		return out, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, malformed("line %d: %s", n.Line, firstLine(err.Error()))
		}
		switch v.(type) {
		case string, int, float64, bool, nil:
			return v, nil
		}
		return nil, malformed("line %d: unsupported value type %T", n.Line, v)
	}
	return nil, malformed("line %d: unsupported yaml node", n.Line)
}

// parseJSON loads a JSON (or binary) document as sops' JSON store does:
// objects in order, numbers as float64.
func parseJSON(f Format, data []byte) (*Document, error) {
	var holder struct {
		Sops *metadata `json:"sops"`
	}
	if err := json.Unmarshal(data, &holder); err != nil || holder.Sops == nil || holder.Sops.MAC == "" {
		return nil, nil //nolint:nilerr // not a SOPS document: the caller's parser reports bad JSON
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, malformed("json: not an object")
	}
	b, err := jsonBranch(dec, 0)
	if err != nil {
		return nil, err
	}
	d := &Document{format: f, branches: []branch{dropSops(b)}, meta: *holder.Sops}
	if f == JSON {
		if err := d.checkIdentity(); err != nil {
			return nil, err
		}
	}
	if f == Binary {
		if len(d.branches[0]) != 1 || d.branches[0][0].key != "data" {
			return nil, malformed(`binary document: want only the "data" key`)
		}
		if _, ok := d.branches[0][0].value.(string); !ok {
			return nil, malformed(`binary document: "data" is not a string`)
		}
	}
	return d, nil
}

func jsonBranch(dec *json.Decoder, depth int) (branch, error) {
	if depth > maxDepth {
		return nil, malformed("nesting deeper than %d", maxDepth)
	}
	var out branch
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed("json: %s", firstLine(err.Error()))
		}
		if tok == json.Delim('}') {
			return out, nil
		}
		k, ok := tok.(string)
		if !ok {
			return nil, malformed("json: expected an object key")
		}
		v, err := jsonValue(dec, depth)
		if err != nil {
			return nil, err
		}
		out = append(out, item{key: k, value: v})
	}
}

func jsonValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed("json: %s", firstLine(err.Error()))
	}
	switch tok {
	case json.Delim('{'):
		return jsonBranch(dec, depth+1)
	case json.Delim('['):
		if depth > maxDepth {
			return nil, malformed("nesting deeper than %d", maxDepth)
		}
		out := []any{}
		for dec.More() {
			v, err := jsonValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, malformed("json: %s", firstLine(err.Error()))
		}
		return out, nil
	}
	return tok, nil // string, float64, bool or nil
}

// parseDotenv loads KEY=VALUE lines as sops' dotenv store does; sops_*
// keys are the flattened metadata.
func parseDotenv(data []byte) (*Document, error) {
	d := &Document{format: Dotenv}
	var b branch
	flat := map[string]string{}
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok {
			return nil, malformed("line %d: not KEY=VALUE", i+1)
		}
		value := strings.ReplaceAll(string(v), `\n`, "\n")
		if name, ok := strings.CutPrefix(string(k), "sops_"); ok {
			flat[name] = value
			continue
		}
		b = append(b, item{key: string(k), value: value})
	}
	d.branches = []branch{b}
	d.meta.MAC = flat["mac"]
	d.meta.LastModified = flat["lastmodified"]
	d.meta.MACOnlyEncrypted = flat["mac_only_encrypted"] == "true"
	if d.meta.MAC == "" {
		return nil, nil
	}
	for i := 0; ; i++ {
		p := fmt.Sprintf("age__list_%d__map_", i)
		r, ok := flat[p+"recipient"]
		if !ok {
			break
		}
		d.meta.Age = append(d.meta.Age, ageStanza{Recipient: r, Enc: flat[p+"enc"]})
	}
	for k := range flat {
		if strings.HasPrefix(k, "key_groups") {
			d.meta.KeyGroups = append(d.meta.KeyGroups, k)
		}
	}
	return d, nil
}
