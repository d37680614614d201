package render

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
	"sigs.k8s.io/kustomize/kyaml/openapi"
)

// kustomize keeps the OpenAPI schema that its strategic-merge patches, merge
// keys and namespace transformer read in process-wide state
// (sigs.k8s.io/kustomize/kyaml/openapi, api v0.21.2): a kustomization's
// `openapi:` field (krusty's Run, and any kustomization it includes) sets a
// custom schema for the rest of the process; a build without one calls
// SetSchema with an empty field, which returns before it clears the custom
// schema, so that build merges lists with the other unit's schema; and a
// custom schema is parsed on top of whatever schema an earlier build parsed,
// so the unit that set it renders differently after another unit than alone.
// Concurrent builds see each other's schema mid-build.
//
// schemaGate makes each build's schema a function of its own kustomizations,
// as if every unit were built by `kustomize build` in a fresh process:
//
//   - builds whose kustomizations set no schema share kustomize's built-in
//     default and run concurrently;
//   - a build whose kustomization graph sets `openapi:` runs alone, from a
//     reset state (a fresh process's), and leaves its schema behind;
//   - the first shared build after it resets the state again, and the
//     built-in schema is parsed anew on first use (BenchmarkSchemaReset
//     measures it; BenchmarkAgentCycleRenders, a cycle with such a unit).
//     Consecutive custom builds do not pay for it.
//
// The waiting counts against the unit's render timeout.
type schemaGate struct {
	sem *semaphore.Weighted
	mu  sync.Mutex
	// custom: the last exclusive build left its schema in kustomize's state.
	custom bool
}

// exclusive is the semaphore's whole weight: a build that takes it runs
// alone; a shared build takes 1.
const exclusive = 1 << 30

var kustomizeSchema = &schemaGate{sem: semaphore.NewWeighted(exclusive)}

// enter waits until a build that sets its own schema (ownSchema) or uses
// the default may run, and readies kustomize's state for it. The caller
// calls release once krusty has returned.
func (g *schemaGate) enter(ctx context.Context, ownSchema bool) (release func(), err error) {
	if ownSchema {
		if err := g.sem.Acquire(ctx, exclusive); err != nil {
			return nil, err
		}
		openapi.ResetOpenAPI()
		return func() {
			g.mu.Lock()
			g.custom = true
			g.mu.Unlock()
			g.sem.Release(exclusive)
		}, nil
	}
	if err := g.sem.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	// No shared build runs while custom is true (the exclusive build that
	// set it held the whole weight), so resetting here disturbs none; mu
	// makes the other shared builds entering now wait for the reset.
	g.mu.Lock()
	if g.custom {
		openapi.ResetOpenAPI()
		g.custom = false
	}
	g.mu.Unlock()
	return func() { g.sem.Release(1) }, nil
}
