package health

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// Checks are a unit's compiled health checks. A nil *Checks has none:
// every object is judged by kstatus.
type Checks struct {
	evaluators map[schema.GroupKind]*fluxcel.StatusEvaluator
	reader     func(meta.RESTMapper) engine.StatusReader
}

// compiled memoises Compile: a unit's checks are compiled once, not every
// cycle (a CEL environment costs milliseconds). Bounded: cleared when it
// grows past maxCompiled distinct sets.
var compiled = struct {
	sync.Mutex
	m map[string]*Checks
}{m: map[string]*Checks{}}

const maxCompiled = 64

// Compile compiles checks; nil when there are none. The error names the
// check (healthChecks[i]) and the expression that does not compile.
func Compile(checks []slice.HealthCheck) (*Checks, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	key := keyOf(checks)
	compiled.Lock()
	c := compiled.m[key]
	compiled.Unlock()
	if c != nil {
		return c, nil
	}
	c = &Checks{evaluators: make(map[schema.GroupKind]*fluxcel.StatusEvaluator, len(checks))}
	flux := make([]kustomize.CustomHealthCheck, len(checks))
	for i, hc := range checks {
		for _, f := range Fields(hc) {
			if err := CheckExpression(f.Value); err != nil {
				return nil, fmt.Errorf("healthChecks[%d].%s: %w", i, f.Name, err)
			}
		}
		gk := GroupKind(hc)
		if _, dup := c.evaluators[gk]; dup {
			return nil, fmt.Errorf("healthChecks[%d]: a second check for %s", i, describe(gk))
		}
		e, err := fluxcel.NewStatusEvaluator(&kustomize.HealthCheckExpressions{Current: hc.Current, InProgress: hc.InProgress, Failed: hc.Failed})
		if err != nil {
			return nil, fmt.Errorf("healthChecks[%d]: %w", i, err)
		}
		c.evaluators[gk] = e
		flux[i] = kustomize.CustomHealthCheck{APIVersion: hc.APIVersion, Kind: hc.Kind,
			HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: hc.Current, InProgress: hc.InProgress, Failed: hc.Failed}}
	}
	reader, err := fluxcel.NewStatusReader(flux)
	if err != nil {
		return nil, err
	}
	c.reader = reader
	compiled.Lock()
	if len(compiled.m) >= maxCompiled {
		clear(compiled.m)
	}
	compiled.m[key] = c
	compiled.Unlock()
	return c, nil
}

// Field is one expression of a check, named as in the fleet repo.
type Field struct{ Name, Value string }

// Fields are the check's expressions that are set: current (required),
// inProgress and failed.
func Fields(hc slice.HealthCheck) []Field {
	fs := []Field{{"current", hc.Current}}
	if hc.InProgress != "" {
		fs = append(fs, Field{"inProgress", hc.InProgress})
	}
	if hc.Failed != "" {
		fs = append(fs, Field{"failed", hc.Failed})
	}
	return fs
}

// CheckExpression reports whether expr compiles as the agent compiles a
// health check's expression.
func CheckExpression(expr string) error {
	if strings.TrimSpace(expr) == "" {
		return fmt.Errorf("empty expression")
	}
	if _, err := fluxcel.NewExpression(expr); err != nil {
		return err
	}
	return nil
}

func (c *Checks) evaluator(gk schema.GroupKind) *fluxcel.StatusEvaluator {
	if c == nil {
		return nil
	}
	if e := c.evaluators[gk]; e != nil {
		return e
	}
	return c.evaluators[schema.GroupKind{Group: gk.Group}]
}

// Status is obj's health: by its check when one covers its kind, else by
// kstatus.
func (c *Checks) Status(ctx context.Context, obj *unstructured.Unstructured) (*kstatus.Result, error) {
	if e := c.evaluator(obj.GroupVersionKind().GroupKind()); e != nil {
		return e.Evaluate(ctx, obj)
	}
	return kstatus.Compute(obj)
}

// StatusReaders are the readers a kstatus poller uses for the covered
// kinds (polling.Options.CustomStatusReaders); none for nil.
func (c *Checks) StatusReaders(mapper meta.RESTMapper) []engine.StatusReader {
	if c == nil {
		return nil
	}
	return []engine.StatusReader{c.reader(mapper)}
}

// GroupKind is what a check covers: its apiVersion's group and its kind
// (no kind: every kind of the group). Two checks of a unit may not cover
// the same.
func GroupKind(hc slice.HealthCheck) schema.GroupKind {
	gk := schema.FromAPIVersionAndKind(hc.APIVersion, hc.Kind).GroupKind()
	if hc.Kind == "" {
		gk.Kind = ""
	}
	return gk
}

func describe(gk schema.GroupKind) string {
	if gk.Kind == "" {
		return "every kind of group " + gk.Group
	}
	return gk.String()
}

func keyOf(checks []slice.HealthCheck) string {
	var b strings.Builder
	for _, hc := range checks {
		for _, s := range [...]string{hc.APIVersion, hc.Kind, hc.Current, hc.InProgress, hc.Failed} {
			fmt.Fprintf(&b, "%d:%s", len(s), s)
		}
	}
	return b.String()
}
