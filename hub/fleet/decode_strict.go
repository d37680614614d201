package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
	kjson "sigs.k8s.io/json"
)

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
	d.addStrict(path, reflect.TypeOf(out).Elem(), strict)
	return true
}

// addStrict reports the unknown fields of a subtree of type t found at
// path.
func (d *document) addStrict(path string, t reflect.Type, strict []error) {
	for _, e := range strict {
		var fe kjson.FieldError
		field := path
		detail := unknownFieldDetail
		if errors.As(e, &fe) {
			rel := fe.FieldPath()
			field = joinPath(path, rel)
			detail += didYouMean(fieldsAt(t, rel), lastSegment(rel))
		}
		d.errorf(field, ErrUnknownField, "%s", detail)
	}
}

const unknownFieldDetail = "not a field of this kind"

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
				d.add(p.keyN.Line, joinPath(path, p.key), ErrUnknownField, "%s", unknownFieldDetail+didYouMean(fields, p.key))
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
	d.addStrict(path, t, strict)
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
	return withArticle(nodeKindName(n))
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
