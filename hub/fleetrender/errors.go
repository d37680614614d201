package fleetrender

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// Error classes of the compiler beyond fleet's, for errors.Is.
var (
	// ErrConflict: two declarations that must agree do not (a namespace
	// declared differently by two fleets of a cluster; one workload divided
	// by two replicaScheduling policies on a cluster).
	ErrConflict = errors.New("conflicting declarations")
	// ErrIncompletePiece: a Divided GlobalJob whose division leaves some
	// cluster's piece without a replica of one of its tasks.
	ErrIncompletePiece = errors.New("divided job piece without a task")
	// ErrUnknownCluster: --cluster named a cluster the repo does not have.
	ErrUnknownCluster = errors.New("unknown cluster")
)

// maxClustersNamed bounds how many clusters one aggregated error lists.
const maxClustersNamed = 5

// errorCollector gathers compile errors. The same problem usually repeats
// on every cluster an application targets; it is reported once, naming the
// clusters, so 10,000 clusters do not produce 10,000 lines.
type errorCollector struct {
	byKey map[errorKey]*collected
}

type errorKey struct {
	file, field, detail string
	kind                error
}

type collected struct {
	line     int
	clusters []string
	total    int
}

func (c *errorCollector) add(file string, line int, field string, kind error, cluster, detail string) {
	if c.byKey == nil {
		c.byKey = map[errorKey]*collected{}
	}
	k := errorKey{file: file, field: field, detail: detail, kind: kind}
	e := c.byKey[k]
	if e == nil {
		e = &collected{line: line}
		c.byKey[k] = e
	}
	if cluster == "" {
		return
	}
	e.total++
	if len(e.clusters) < maxClustersNamed {
		e.clusters = append(e.clusters, cluster)
	}
}

func (c *errorCollector) addf(file string, line int, field string, kind error, cluster, format string, args ...any) {
	c.add(file, line, field, kind, cluster, fmt.Sprintf(format, args...))
}

func (c *errorCollector) empty() bool { return len(c.byKey) == 0 }

// list returns the errors sorted by file, line and field.
func (c *errorCollector) list() fleet.ErrorList {
	var out fleet.ErrorList
	for k, e := range c.byKey {
		detail := k.detail
		if e.total > 0 {
			detail += " (" + describeClusters(e.clusters, e.total) + ")"
		}
		out = append(out, &fleet.FieldError{File: k.file, Line: e.line, Field: k.field, Kind: k.kind, Detail: detail})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Detail < b.Detail
	})
	return out
}

func describeClusters(named []string, total int) string {
	s := append([]string(nil), named...)
	sort.Strings(s)
	word := "cluster "
	if total > 1 {
		word = "clusters "
	}
	out := word + strings.Join(s, ", ")
	if total > len(s) {
		out += fmt.Sprintf(" and %d more", total-len(s))
	}
	return out
}
