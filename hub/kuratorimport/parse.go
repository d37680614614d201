package kuratorimport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// Error classes, for errors.Is on a *fleet.FieldError.
var (
	// ErrNoEquivalent classes a warning: an input field Flotilla has no
	// equivalent for, dropped from the output.
	ErrNoEquivalent = errors.New("no Flotilla equivalent")
	// ErrNeedsAction classes a warning the user must act on before the
	// imported repo renders as Kurator deployed it (a Git ref render cannot pin).
	ErrNeedsAction = errors.New("action needed")
	// ErrUnknownKind classes a document that is not a Kurator kind this
	// importer reads.
	ErrUnknownKind = errors.New("unknown kind")
)

// Kurator API groups and kinds read by the importer.
const (
	groupFleet   = "fleet.kurator.dev/"
	groupCluster = "cluster.kurator.dev/"
	groupApps    = "apps.kurator.dev/"

	kindFleet           = "Fleet"
	kindAttachedCluster = "AttachedCluster"
	kindCluster         = "Cluster"
	kindApplication     = "Application"
)

// maxInputBytes bounds one input file; Kurator manifests are small.
const maxInputBytes = 8 << 20

type meta struct {
	Name        string            `yaml:"name"`
	Namespace   string            `yaml:"namespace"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// object is one Kurator document: header, metadata and the spec node,
// decoded per kind later, plus the line of every field.
type object struct {
	File       string
	Line       int
	APIVersion string
	Kind       string
	Meta       meta
	Spec       *yaml.Node
	lines      map[string]int
}

// line returns the line of field, or of its nearest parent, or of the document.
func (o *object) line(field string) int {
	for f := field; f != ""; f = parent(f) {
		if n, ok := o.lines[f]; ok {
			return n
		}
	}
	return o.Line
}

func parent(f string) string {
	i := strings.LastIndexAny(f, ".[")
	if i < 0 {
		return ""
	}
	return f[:i]
}

func (o *object) key() string { return o.Kind + " " + o.Meta.Namespace + "/" + o.Meta.Name }

// errorf builds an error located at field of o.
func (o *object) errorf(field string, class error, format string, args ...any) *fleet.FieldError {
	return &fleet.FieldError{File: o.File, Line: o.line(field), Field: field, Kind: class, Detail: fmt.Sprintf(format, args...)}
}

// ReadInputs reads the YAML files named by paths; a directory contributes
// its *.yaml and *.yml files, recursively, in lexical order. File names in
// errors and warnings are the paths as given.
func ReadInputs(paths []string) (map[string][]byte, []string, error) {
	files := map[string][]byte{}
	var order []string
	add := func(p string) error {
		if _, dup := files[p]; dup {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("read input: %w", err)
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxInputBytes+1))
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if len(data) > maxInputBytes {
			return fmt.Errorf("%s: larger than %d bytes", p, maxInputBytes)
		}
		files[p] = data
		order = append(order, p)
		return nil
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("input: %w", err)
		}
		if !st.IsDir() {
			if err := add(p); err != nil {
				return nil, nil, err
			}
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(q string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.Type().IsRegular() && (strings.HasSuffix(q, ".yaml") || strings.HasSuffix(q, ".yml")) {
				found = append(found, q)
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("input %s: %w", p, err)
		}
		sort.Strings(found)
		for _, q := range found {
			if err := add(q); err != nil {
				return nil, nil, err
			}
		}
	}
	return files, order, nil
}

// parseFile splits one file into Kurator objects. Empty documents are
// skipped; a List's items are not unwrapped (Kurator examples never use one).
func parseFile(file string, data []byte) ([]*object, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*object
	var errs fleet.ErrorList
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, fleet.SyntaxError(file, data, err))
			break
		}
		if len(doc.Content) == 0 || (doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null") {
			continue
		}
		o, err := parseObject(file, doc.Content[0])
		if err != nil {
			var fe *fleet.FieldError
			if errors.As(err, &fe) {
				errs = append(errs, fe)
				continue
			}
			return nil, err
		}
		if o != nil {
			out = append(out, o)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 100

func parseObject(file string, n *yaml.Node) (*object, error) {
	o := &object{File: file, Line: n.Line, lines: map[string]int{}}
	if n.Kind != yaml.MappingNode {
		return nil, o.errorf("", fleet.ErrSyntax, "a document must be a mapping, not a %s", nodeKind(n))
	}
	if err := o.index(n, "", 0); err != nil {
		return nil, err
	}
	var hdr struct {
		APIVersion string    `yaml:"apiVersion"`
		Kind       string    `yaml:"kind"`
		Metadata   yaml.Node `yaml:"metadata"`
		Spec       yaml.Node `yaml:"spec"`
	}
	if err := n.Decode(&hdr); err != nil {
		return nil, o.decodeError("", err)
	}
	o.APIVersion, o.Kind = hdr.APIVersion, hdr.Kind
	if hdr.Spec.Kind != 0 {
		o.Spec = &hdr.Spec
	}
	if o.Kind == "" {
		return nil, o.errorf("kind", fleet.ErrRequired, "every document needs apiVersion and kind")
	}
	group := o.APIVersion
	if i := strings.Index(group, "/"); i >= 0 {
		group = group[:i+1]
	}
	known := map[string][]string{groupFleet: {kindFleet}, groupCluster: {kindAttachedCluster, kindCluster}, groupApps: {kindApplication}}
	kinds, ok := known[group]
	if !ok || !contains(kinds, o.Kind) {
		return nil, o.errorf("kind", ErrUnknownKind, "%s %s is not one of fleet.kurator.dev Fleet, cluster.kurator.dev AttachedCluster or Cluster, apps.kurator.dev Application", o.APIVersion, o.Kind)
	}
	if hdr.Metadata.Kind != 0 {
		if err := hdr.Metadata.Decode(&o.Meta); err != nil {
			return nil, o.decodeError("metadata", err)
		}
	}
	if o.Meta.Name == "" {
		return nil, o.errorf("metadata.name", fleet.ErrRequired, "every %s needs a name", o.Kind)
	}
	if o.Meta.Namespace == "" {
		o.Meta.Namespace = "default"
	}
	return o, nil
}

// index records the line of every field path under n.
func (o *object) index(n *yaml.Node, path string, depth int) error {
	if depth > maxDepth {
		return o.errorf(path, fleet.ErrSyntax, "nested deeper than %d levels", maxDepth)
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := join(path, n.Content[i].Value)
			o.lines[p] = n.Content[i].Line
			if err := o.index(n.Content[i+1], p, depth+1); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			o.lines[p] = c.Line
			if err := o.index(c, p, depth+1); err != nil {
				return err
			}
		}
	case yaml.AliasNode:
		return o.errorf(path, fleet.ErrSyntax, "YAML aliases are not supported in Kurator inputs")
	}
	return nil
}

// typeErrorLine splits yaml.v3's "line N: cannot unmarshal T V into G"
// type errors.
var typeErrorLine = regexp.MustCompile(`^line (\d+): cannot unmarshal (\S+) (.*) into (\S+)$`)

// decodeError turns a yaml.v3 type error into a FieldError located at the
// deepest field on its line, in the input's terms rather than Go's.
func (o *object) decodeError(field string, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return o.errorf(field, fleet.ErrInvalidValue, "%v", err)
	}
	msg := te.Errors[0]
	m := typeErrorLine.FindStringSubmatch(msg)
	if m == nil {
		return o.errorf(field, fleet.ErrInvalidValue, "%s", msg)
	}
	line, _ := strconv.Atoi(m[1])
	best := field
	for p, n := range o.lines {
		if n == line && strings.HasPrefix(p, field) && (len(p) > len(best) || len(p) == len(best) && p < best) {
			best = p
		}
	}
	field = best
	fe := o.errorf(field, fleet.ErrInvalidValue, "%s %s where %s is expected", strings.TrimPrefix(m[2], "!!"), m[3], goTypeName(m[4]))
	fe.Line = line
	return fe
}

func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map[") || strings.Contains(t, "."):
		return "a mapping"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "float"):
		return "a number"
	default:
		return "a " + t
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	default:
		return "node"
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
