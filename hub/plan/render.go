package plan

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// renderJob is one unit render on one side.
type renderJob struct {
	side    *side
	cluster string
	unit    slice.Unit
	objs    []*unstructured.Unstructured
	// hooks are the unit's Helm hooks, normalized; hookRuns says when each
	// runs, by apiVersion and ObjectPlan.ID.
	hooks    []*unstructured.Unstructured
	hookRuns map[string]string
	// unknownScope are the kinds whose scope nothing told (render's
	// Result.UnknownScope, with the fleet's CRDs known).
	unknownScope []string
	// encrypted are the SOPS files the render read (render.Result).
	encrypted []string
	err       error
}

// renderAll prepares every job's unit directory from the compiled files,
// then renders them concurrently.
func (pl *planner) renderAll(ctx context.Context, jobs []*renderJob) error {
	for _, j := range jobs {
		if err := writeUnitDir(j.side, j.cluster, j.unit); err != nil {
			return err
		}
	}
	workers := pl.opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Custom kinds take their scope from the CRDs the fleet ships (every
	// unit compile rendered, head's first); a kind of unknown scope is
	// reported (diff.go).
	scopes := maps.Clone(pl.base.out.KindScopes)
	if scopes == nil {
		scopes = map[schema.GroupKind]bool{}
	}
	maps.Copy(scopes, pl.head.out.KindScopes)
	next := make(chan *renderJob)
	var wg sync.WaitGroup
	for range min(workers, max(1, len(jobs))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				caps := pl.caps[j.cluster]
				res, err := render.Unit(ctx, j.side.root, j.unit, render.Options{
					Capabilities:  render.Capabilities{KubeVersion: caps.KubeVersion, APIVersions: caps.list, Namespaced: scopes},
					Limits:        pl.opts.Limits,
					HelmInProcess: pl.opts.HelmInProcess,
				})
				if err != nil {
					j.err = err
					continue
				}
				j.unknownScope = res.UnknownScope
				j.encrypted = res.Encrypted
				j.objs = make([]*unstructured.Unstructured, len(res.Objects))
				for i, o := range res.Objects {
					j.objs[i] = pl.masker.normalize(o)
				}
				j.hookRuns = map[string]string{}
				for _, h := range res.Hooks {
					o := pl.masker.normalize(h.Object)
					j.hooks = append(j.hooks, o)
					id := objectPlan(o, "", "", nil)
					j.hookRuns[o.GetAPIVersion()+" "+id.ID()] = hookRun(h)
				}
			}
		}()
	}
	for _, j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	return ctx.Err()
}

// writeUnitDir makes the unit directory in a side's copy hold exactly the
// compiled files: the committed rendered/ may be stale or missing.
func writeUnitDir(s *side, cluster string, u slice.Unit) error {
	if !filepath.IsLocal(filepath.FromSlash(u.Path)) {
		return fmt.Errorf("plan: unit path %q: %w", u.Path, fleetrender.ErrUnsafePath)
	}
	dir := filepath.Join(s.root, filepath.FromSlash(u.Path))
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	co := s.byName[cluster]
	prefix := u.Path + "/"
	i := sort.Search(len(co.Files), func(i int) bool { return co.Files[i].Path >= prefix })
	for ; i < len(co.Files) && strings.HasPrefix(co.Files[i].Path, prefix); i++ {
		f := co.Files[i]
		rel := strings.TrimPrefix(f.Path, prefix)
		target := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		if err := os.WriteFile(target, f.Data, 0o644); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
	}
	return nil
}

// hookRun says when the agent runs a hook: "pre-install,pre-upgrade;
// weight -5; delete before-hook-creation".
func hookRun(h render.Hook) string {
	return fmt.Sprintf("%s; weight %d; delete %s", strings.Join(h.Events, ","), h.Weight, strings.Join(h.DeletePolicies, ","))
}
