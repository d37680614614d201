package kuratorimport

import (
	"fmt"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

var index = regexp.MustCompile(`\[\d+\]`)

// unmapped reports every field under spec that the converter does not
// consume, at the shallowest such field. metadata fields other than name,
// namespace, labels and annotations and the whole status are runtime
// state and are skipped without a warning.
func unmapped(o *object) fleet.ErrorList {
	if o.Spec == nil {
		return nil
	}
	consumed := map[string]bool{}
	subtree := map[string]bool{}
	for _, p := range mapped[o.Kind] {
		if p[len(p)-1] == '/' {
			subtree[p[:len(p)-1]] = true
		} else {
			consumed[p] = true
		}
	}
	var out fleet.ErrorList
	var walk func(n *yaml.Node, path string)
	visit := func(n *yaml.Node, path, key string) {
		pattern := index.ReplaceAllString(path, "[]")
		switch {
		case subtree[pattern]:
		case consumed[pattern]:
			walk(n, path)
		default:
			out = append(out, o.errorf(path, ErrNoEquivalent, "%s; dropped", reason(o.Kind, key)))
		}
	}
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				visit(n.Content[i+1], join(path, k), k)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				visit(c, path+"["+strconv.Itoa(i)+"]", "")
			}
		}
	}
	walk(o.Spec, "spec")
	return out
}

func reason(kind, key string) string {
	switch {
	case kind == kindCluster:
		return provisioning
	case reasons[key] != "":
		return reasons[key]
	default:
		return fmt.Sprintf("%s has no Flotilla equivalent", key)
	}
}
