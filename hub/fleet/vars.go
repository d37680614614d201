package fleet

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Cluster variables usable in override strings. Only ${cluster.…} is ours:
// any other ${…} (a shell variable in a container command, say) is left as
// written.
const (
	clusterVarPrefix = "${cluster."
	clusterVarName   = "name"
	clusterVarLabels = "labels."
)

// ClusterVar is one ${cluster.…} reference: Label is empty for
// ${cluster.name}, else the label key of ${cluster.labels.<key>}.
type ClusterVar struct {
	Label string
}

// ClusterVars lists the cluster variables s refers to. An unknown variable
// (${cluster.region}), an unterminated one or an invalid label key is an
// ErrInvalidValue.
func ClusterVars(s string) ([]ClusterVar, error) {
	var vars []ClusterVar
	for rest := s; ; {
		i := strings.Index(rest, clusterVarPrefix)
		if i < 0 {
			return vars, nil
		}
		rest = rest[i+len(clusterVarPrefix):]
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return nil, fmt.Errorf("%w: unterminated ${cluster.…} variable", ErrInvalidValue)
		}
		expr := rest[:end]
		rest = rest[end+1:]
		switch {
		case expr == clusterVarName:
			vars = append(vars, ClusterVar{})
		case strings.HasPrefix(expr, clusterVarLabels):
			key := strings.TrimPrefix(expr, clusterVarLabels)
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				return nil, fmt.Errorf("%w: ${cluster.%s}: invalid label key: %s", ErrInvalidValue, expr, strings.Join(errs, "; "))
			}
			vars = append(vars, ClusterVar{Label: key})
		default:
			return nil, fmt.Errorf("%w: unknown variable ${cluster.%s} (use ${cluster.name} or ${cluster.labels.<key>})", ErrInvalidValue, expr)
		}
	}
}

// ExpandClusterVars replaces ${cluster.name} and ${cluster.labels.<key>} in
// s with the cluster's values. A label the cluster lacks is an
// ErrInvalidValue, so a typo never renders as an empty string.
func ExpandClusterVars(s string, c *Cluster) (string, error) {
	if !strings.Contains(s, clusterVarPrefix) {
		return s, nil
	}
	var b strings.Builder
	for rest := s; ; {
		i := strings.Index(rest, clusterVarPrefix)
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		b.WriteString(rest[:i])
		rest = rest[i+len(clusterVarPrefix):]
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return "", fmt.Errorf("%w: unterminated ${cluster.…} variable", ErrInvalidValue)
		}
		expr := rest[:end]
		rest = rest[end+1:]
		switch {
		case expr == clusterVarName:
			b.WriteString(c.Metadata.Name)
		case strings.HasPrefix(expr, clusterVarLabels):
			key := strings.TrimPrefix(expr, clusterVarLabels)
			v, ok := c.Metadata.Labels[key]
			if !ok {
				return "", fmt.Errorf("%w: ${cluster.%s}: cluster %s has no label %q", ErrInvalidValue, expr, c.Metadata.Name, key)
			}
			b.WriteString(v)
		default:
			return "", fmt.Errorf("%w: unknown variable ${cluster.%s} (use ${cluster.name} or ${cluster.labels.<key>})", ErrInvalidValue, expr)
		}
	}
}
