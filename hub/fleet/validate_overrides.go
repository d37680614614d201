package fleet

import (
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

func (v *validator) overrides(d *document, field string, o *Overrides, clusters []*Cluster) {
	// Every string the compiler expands per cluster, with its field.
	type expandable struct{ field, value string }
	var strs []expandable
	if o.Namespace != "" {
		strs = append(strs, expandable{field + ".namespace", o.Namespace})
	}
	for i, p := range o.Patches {
		pf := indexPath(field+".patches", i)
		strs = append(strs, expandable{pf + ".patch", p.Patch})
		if t := p.Target; t != nil {
			for _, f := range []expandable{
				{pf + ".target.group", t.Group}, {pf + ".target.version", t.Version}, {pf + ".target.kind", t.Kind},
				{pf + ".target.name", t.Name}, {pf + ".target.namespace", t.Namespace},
				{pf + ".target.labelSelector", t.LabelSelector}, {pf + ".target.annotationSelector", t.AnnotationSelector},
			} {
				if f.value != "" {
					strs = append(strs, f)
				}
			}
		}
		checkPatch(d, pf, p)
	}
	images := map[string]int{}
	for i, img := range o.Images {
		f := indexPath(field+".images", i)
		if img.Name == "" {
			d.errorf(f+".name", ErrRequired, "the image name to replace")
		} else if j, dup := images[img.Name]; dup {
			d.errorf(f+".name", ErrDuplicate, "image %q is already overridden at %s", img.Name, indexPath(field+".images", j))
		} else {
			images[img.Name] = i
		}
		if img.NewName == "" && img.NewTag == "" && img.Digest == "" {
			d.errorf(f, ErrRequired, "set newName, newTag or digest")
		}
		for _, s := range []expandable{{f + ".newName", img.NewName}, {f + ".newTag", img.NewTag}, {f + ".digest", img.Digest}} {
			if s.value != "" {
				strs = append(strs, s)
			}
		}
	}
	replicas := map[string]int{}
	for i, r := range o.Replicas {
		f := indexPath(field+".replicas", i)
		if r.Name == "" {
			d.errorf(f+".name", ErrRequired, "the workload whose replicas to set")
		} else if j, dup := replicas[r.Name]; dup {
			d.errorf(f+".name", ErrDuplicate, "workload %q is already set at %s", r.Name, indexPath(field+".replicas", j))
		} else {
			replicas[r.Name] = i
		}
		if r.Count < 0 {
			d.errorf(f+".count", ErrInvalidValue, "%d must not be negative", r.Count)
		}
	}
	checkValues(d, field+".values", o.Values)
	if o.Values != nil && len(o.Values.Raw) > 0 {
		var tree any
		if json.Unmarshal(o.Values.Raw, &tree) == nil {
			walkStrings(tree, field+".values", func(f, s string) { strs = append(strs, expandable{f, s}) })
		}
	}
	for _, s := range strs {
		if _, err := ClusterVars(s.value); err != nil {
			d.errorf(s.field, ErrInvalidValue, "%s", strings.TrimPrefix(err.Error(), ErrInvalidValue.Error()+": "))
			continue
		}
		for _, c := range clusters {
			x, err := ExpandClusterVars(s.value, c)
			if err != nil {
				d.errorf(s.field, ErrInvalidValue, "%s", strings.TrimPrefix(err.Error(), ErrInvalidValue.Error()+": "))
				break
			}
			if x == s.value {
				continue // no variables: checked once, not per cluster
			}
			if s.field == field+".namespace" {
				if errs := validation.IsDNS1123Label(x); len(errs) > 0 {
					d.errorf(s.field, ErrInvalidValue, "%q on cluster %s is not a valid namespace: %s", x, c.Metadata.Name, strings.Join(errs, "; "))
					break
				}
			}
			if strings.HasSuffix(s.field, "Selector") {
				if _, err := labels.Parse(x); err != nil {
					d.errorf(s.field, ErrInvalidValue, "%q on cluster %s is not a valid selector: %v", x, c.Metadata.Name, err)
					break
				}
			}
		}
		if len(clusters) == 0 && s.field == field+".namespace" && !strings.Contains(s.value, clusterVarPrefix) {
			dnsLabel(d, s.field, s.value)
		}
	}
}

// walkStrings calls fn for every string leaf of a decoded JSON tree.
func walkStrings(v any, field string, fn func(field, s string)) {
	switch t := v.(type) {
	case string:
		fn(field, t)
	case map[string]any:
		for _, k := range sortedKeys(t) {
			walkStrings(t[k], joinPath(field, k), fn)
		}
	case []any:
		for i, e := range t {
			walkStrings(e, indexPath(field, i), fn)
		}
	}
}

var json6902Ops = map[string]bool{"add": true, "remove": true, "replace": true, "move": true, "copy": true, "test": true}

// checkPatch parses a patch: a list is a JSON6902 patch (which needs a
// target), a mapping a strategic-merge patch (which names its object unless
// a target does).
func checkPatch(d *document, field string, p Patch) {
	if strings.TrimSpace(p.Patch) == "" {
		d.errorf(field+".patch", ErrRequired, "the patch text")
		return
	}
	pd := &document{file: d.file}
	n := pd.parseOne([]byte(p.Patch))
	if n != nil {
		// Convert too, so an alias bomb inside the patch text is caught
		// here rather than by Kustomize.
		pd.toJSON(n, "")
	}
	if len(pd.errs) > 0 {
		e := pd.errs[0]
		where := ""
		if e.Line > 0 {
			where = fmt.Sprintf("line %d of the patch: ", e.Line)
		}
		d.errorf(field+".patch", ErrInvalidValue, "does not parse as YAML: %s%s", where, e.Detail)
		return
	}
	switch n.Kind {
	case yaml.SequenceNode:
		if p.Target == nil {
			d.errorf(field+".target", ErrRequired, "a JSON6902 patch (a list of operations) needs a target")
		}
		for i, op := range n.Content {
			op = deref(op)
			if op.Kind != yaml.MappingNode {
				d.errorf(field+".patch", ErrInvalidValue, "operation %d is not a mapping", i)
				return
			}
			var name, opPath string
			for _, kv := range pd.mappingPairs(op, "") {
				if v := deref(kv.value); v.Kind == yaml.ScalarNode {
					switch kv.key {
					case "op":
						name = v.Value
					case "path":
						opPath = v.Value
					}
				}
			}
			if !json6902Ops[name] {
				d.errorf(field+".patch", ErrInvalidValue, "operation %d: op %q is not one of add, remove, replace, move, copy, test", i, name)
				return
			}
			if !strings.HasPrefix(opPath, "/") && opPath != "" || !pd.hasKey(op, "path") {
				d.errorf(field+".patch", ErrInvalidValue, "operation %d: path must be a JSON pointer such as /spec/replicas", i)
				return
			}
		}
	case yaml.MappingNode:
		if p.Target == nil {
			var kind, name string
			for _, kv := range pd.mappingPairs(n, "") {
				switch v := deref(kv.value); kv.key {
				case "kind":
					kind = v.Value
				case "metadata":
					if v.Kind == yaml.MappingNode {
						for _, m := range pd.mappingPairs(v, "") {
							if m.key == "name" {
								name = deref(m.value).Value
							}
						}
					}
				}
			}
			if kind == "" || name == "" {
				d.errorf(field+".patch", ErrInvalidValue, "a strategic-merge patch without a target must name its kind and metadata.name")
			}
		}
	default:
		d.errorf(field+".patch", ErrInvalidValue, "a patch is a mapping (strategic merge) or a list of operations (JSON6902)")
	}
	// A selector with cluster variables is checked once expanded, per cluster.
	if t := p.Target; t != nil {
		if t.LabelSelector != "" && !strings.Contains(t.LabelSelector, clusterVarPrefix) {
			if _, err := labels.Parse(t.LabelSelector); err != nil {
				d.errorf(field+".target.labelSelector", ErrInvalidValue, "invalid label selector: %v", err)
			}
		}
		if t.AnnotationSelector != "" && !strings.Contains(t.AnnotationSelector, clusterVarPrefix) {
			if _, err := labels.Parse(t.AnnotationSelector); err != nil {
				d.errorf(field+".target.annotationSelector", ErrInvalidValue, "invalid annotation selector: %v", err)
			}
		}
	}
}

func (d *document) hasKey(n *yaml.Node, key string) bool {
	for _, kv := range d.mappingPairs(n, "") {
		if kv.key == key {
			return true
		}
	}
	return false
}
