package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/plural"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// planner diffs the compiled sides cluster by cluster.
type planner struct {
	opts       Options
	masker     *masker
	base, head *side
	caps       map[string]Capabilities
	notes      noteCollector
	moves      moveCollector
	rendered   int
}

// unitPair is a unit present on either side of one cluster.
type unitPair struct {
	name       string
	base, head *slice.Unit
	baseJob    *renderJob
	headJob    *renderJob
}

func (pl *planner) run(ctx context.Context, p *Plan) error {
	names := map[string]bool{}
	for n := range pl.base.byName {
		names[n] = true
	}
	for n := range pl.head.byName {
		names[n] = true
	}
	clusters := sortedKeys(names)

	// Pair units and decide what must be rendered: a unit whose hash is the
	// same on both sides renders the same objects (same inputs, same
	// capabilities), so it is skipped without rendering.
	pairs := map[string][]*unitPair{}
	var jobs []*renderJob
	for _, c := range clusters {
		var bs, hs []slice.Unit
		if co := pl.base.byName[c]; co != nil {
			bs = co.Slice.Units
		}
		if co := pl.head.byName[c]; co != nil {
			hs = co.Slice.Units
		}
		byName := map[string]*unitPair{}
		var order []*unitPair
		for i := range hs {
			up := &unitPair{name: hs[i].Name, head: &hs[i]}
			byName[up.name] = up
			order = append(order, up)
		}
		for i := range bs {
			if up, ok := byName[bs[i].Name]; ok {
				up.base = &bs[i]
				continue
			}
			order = append(order, &unitPair{name: bs[i].Name, base: &bs[i]})
		}
		p.Stats.UnitsCompared += len(order)
		for _, up := range order {
			if up.base != nil && up.head != nil && up.base.Hash == up.head.Hash {
				continue
			}
			if up.base != nil {
				up.baseJob = &renderJob{side: pl.base, cluster: c, unit: *up.base}
				jobs = append(jobs, up.baseJob)
			}
			if up.head != nil {
				up.headJob = &renderJob{side: pl.head, cluster: c, unit: *up.head}
				jobs = append(jobs, up.headJob)
			}
		}
		pairs[c] = order
	}
	if err := pl.renderAll(ctx, jobs); err != nil {
		return err
	}
	pl.rendered = len(jobs)
	p.Stats.UnitsRendered = len(jobs)

	for _, c := range clusters {
		cp, err := pl.cluster(c, pairs[c], p)
		if err != nil {
			return err
		}
		if cp == nil {
			continue
		}
		p.Summary.add(cp.Counts)
		p.Clusters = append(p.Clusters, *cp)
	}
	p.Notes = append(p.Notes, pl.notes.notes()...)
	p.Ownership = append(pl.moves.notes(), newNotes(pl.base.out.Notes, pl.head.out.Notes)...)
	return nil
}

// cluster builds one cluster's plan; nil when nothing changes.
func (pl *planner) cluster(name string, pairs []*unitPair, p *Plan) (*ClusterPlan, error) {
	cp := &ClusterPlan{Name: name, Change: Changed, Capabilities: pl.caps[name], Units: []UnitPlan{}}
	_, inBase := pl.base.byName[name]
	_, inHead := pl.head.byName[name]
	switch {
	case !inBase:
		cp.Change = Added
	case !inHead:
		cp.Change = Removed
		p.Warnings = append(p.Warnings, fmt.Sprintf("cluster %s leaves the fleet repo: its agent finds no slice and keeps what it applied last; nothing is deleted on it.", name))
	}
	for _, up := range pairs {
		if j := up.headJob; j != nil && len(j.unknownScope) > 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("cluster %s unit %s: the scope of %s is not known here (not a built-in kind, and no CRD in the fleet defines it); plan shows such objects as namespaced, the agent places them as its cluster serves them.",
				name, up.name, strings.Join(j.unknownScope, ", ")))
		}
		u, err := pl.unit(name, up)
		if err != nil {
			return nil, err
		}
		if u == nil {
			continue
		}
		if u.Error != "" {
			p.Failed = true
		}
		if u.BaseError != "" {
			p.Warnings = append(p.Warnings, fmt.Sprintf("cluster %s unit %s failed to render at base (%s); its head objects are shown as added.", name, u.Name, u.BaseError))
		}
		switch u.Change {
		case Added:
			cp.Counts.UnitsAdded++
		case Removed:
			cp.Counts.UnitsRemoved++
		default:
			cp.Counts.UnitsChanged++
		}
		for _, o := range u.Objects {
			switch o.Change {
			case Added:
				cp.Counts.ObjectsAdded++
			case Removed:
				cp.Counts.ObjectsRemoved++
			default:
				cp.Counts.ObjectsChanged++
			}
		}
		cp.Units = append(cp.Units, *u)
	}
	if len(cp.Units) == 0 && cp.Change == Changed {
		return nil, nil
	}
	pl.moves.observe(name, cp.Units)
	if w := heldPruneWarning(name, pl.base.byName[name], pl.head.byName[name]); w != "" {
		p.Warnings = append(p.Warnings, w)
	}
	cp.Counts.Clusters = 1
	return cp, nil
}

// unit builds one unit's plan; nil when nothing changes.
func (pl *planner) unit(cluster string, up *unitPair) (*UnitPlan, error) {
	u := &UnitPlan{Name: up.name, Objects: []ObjectPlan{}}
	switch {
	case up.base == nil:
		u.Change, u.Kind, u.HeadHash = Added, string(up.head.Kind), up.head.Hash
	case up.head == nil:
		u.Change, u.Kind, u.BaseHash = Removed, string(up.base.Kind), up.base.Hash
	default:
		u.Change, u.Kind, u.BaseHash, u.HeadHash = Changed, string(up.head.Kind), up.base.Hash, up.head.Hash
		u.Settings = settingsDiff(up.base, up.head)
	}
	u.Suspended = up.head != nil && up.head.Suspend
	if up.baseJob == nil && up.headJob == nil {
		// Same hash: only settings can differ.
		if len(u.Settings) == 0 {
			return nil, nil
		}
		return u, nil
	}
	var baseObjs, headObjs, baseHooks, headHooks []*unstructured.Unstructured
	if j := up.baseJob; j != nil {
		if j.err != nil {
			u.BaseError = j.err.Error()
		}
		baseObjs, baseHooks = j.objs, j.hooks
	}
	if j := up.headJob; j != nil {
		if j.err != nil {
			u.Error = j.err.Error()
			return u, nil
		}
		headObjs, headHooks = j.objs, j.hooks
		// The agent refuses an empty render unless the unit allows it, and
		// keeps what it applied: listing its objects as removed would be
		// wrong.
		if len(headObjs) == 0 && up.head != nil && !up.head.AllowEmpty {
			u.Error = "renders no objects and allowEmpty is not set: the agent refuses the unit and keeps what it applied"
			return u, nil
		}
	}
	objs, err := diffObjects(baseObjs, headObjs)
	if err != nil {
		return nil, fmt.Errorf("plan: cluster %s unit %s: %w", cluster, up.name, err)
	}
	if objs != nil { // never null in JSON
		u.Objects = objs
	}
	if u.Hooks, err = diffHooks(up, baseHooks, headHooks); err != nil {
		return nil, fmt.Errorf("plan: cluster %s unit %s: %w", cluster, up.name, err)
	}
	pl.notes.observe(cluster, up.name, baseObjs, headObjs)
	if u.Change == Changed && len(objs) == 0 && len(u.Hooks) == 0 && len(u.Settings) == 0 && u.BaseError == "" {
		// A new hash with the same objects (a comment changed, a SOPS
		// file re-keyed) is still a change: the agent re-renders and
		// re-applies the unit, and runs its hooks again.
		u.InputsOnly = true
		u.Reencrypted, err = reencrypted(pl.base.root, pl.head.root, up.baseJob.encrypted, up.headJob.encrypted)
		if err != nil {
			return nil, fmt.Errorf("plan: cluster %s unit %s: %w", cluster, up.name, err)
		}
	}
	return u, nil
}

// reencrypted are the SOPS files either side's render read whose bytes
// differ between the two trees (or that only one side has).
func reencrypted(baseRoot, headRoot string, base, head []string) ([]string, error) {
	var out []string
	for _, rel := range slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(base), head...)))) {
		b, errB := os.ReadFile(filepath.Join(baseRoot, filepath.FromSlash(rel)))
		h, errH := os.ReadFile(filepath.Join(headRoot, filepath.FromSlash(rel)))
		for _, err := range []error{errB, errH} {
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
		if (errB == nil) != (errH == nil) || !bytes.Equal(b, h) {
			out = append(out, rel)
		}
	}
	return out, nil
}

// inputsOnlyText says what an InputsOnly unit's change is; without the
// hashes, which differ between clusters whose changes are the same, for
// Markdown's grouped sections.
func inputsOnlyText(u *UnitPlan, hashes bool) string {
	why := "inputs changed but no object differs"
	if hashes {
		why = "inputs changed (content hash " + shortHash(u.BaseHash) + " → " + shortHash(u.HeadHash) + ") but no object differs"
	}
	if len(u.Reencrypted) > 0 {
		why += ": SOPS files re-keyed or re-encrypted, their encrypted values unchanged (" + strings.Join(u.Reencrypted, ", ") + ")"
	}
	why += "; the agent renders and applies the unit again"
	if u.Kind == string(slice.UnitHelm) {
		why += " and runs its Helm hooks again"
	}
	return why
}

// shortHash is "sha256:" and the first 12 hex digits.
func shortHash(h string) string {
	if len(h) > len("sha256:")+12 {
		return h[:len("sha256:")+12] + "…"
	}
	return h
}

// diffHooks compares a unit's Helm hooks as diffObjects does its objects,
// saying when each runs (as at head; as at base for a removed one).
func diffHooks(up *unitPair, base, head []*unstructured.Unstructured) ([]ObjectPlan, error) {
	hooks, err := diffObjects(base, head)
	if err != nil || len(hooks) == 0 {
		return nil, err
	}
	for i := range hooks {
		j := up.headJob
		if hooks[i].Change == Removed {
			j = up.baseJob
		}
		h := &hooks[i]
		h.Hook = j.hookRuns[h.APIVersion+" "+h.ID()]
	}
	return hooks, nil
}

// settingsDiff lists changes of how a unit is applied.
func settingsDiff(b, h *slice.Unit) []string {
	var out []string
	add := func(field string, before, after any) {
		if fmt.Sprint(before) != fmt.Sprint(after) {
			out = append(out, fmt.Sprintf("%s: %v → %v", field, orNone(before), orNone(after)))
		}
	}
	add("kind", b.Kind, h.Kind)
	add("namespace", b.Namespace, h.Namespace)
	add("dependsOn", strings.Join(b.DependsOn, ","), strings.Join(h.DependsOn, ","))
	add("prune", b.Prune, h.Prune)
	add("allowEmpty", b.AllowEmpty, h.AllowEmpty)
	add("wait", b.Wait, h.Wait)
	add("timeout", b.Timeout.Duration, h.Timeout.Duration)
	add("suspend", b.Suspend, h.Suspend)
	add("failFast", !b.WaitForTimeout, !h.WaitForTimeout)
	add("healthChecks", healthCheckKinds(b.HealthChecks), healthCheckKinds(h.HealthChecks))
	if !slices.Equal(b.HealthChecks, h.HealthChecks) && healthCheckKinds(b.HealthChecks) == healthCheckKinds(h.HealthChecks) {
		out = append(out, "healthChecks: expressions changed")
	}
	if b.Helm != nil && h.Helm != nil {
		add("helm.chart", b.Helm.Chart, h.Helm.Chart)
		add("helm.releaseName", b.Helm.ReleaseName, h.Helm.ReleaseName)
	}
	return out
}

// healthCheckKinds names the kinds health checks cover, as
// "apiVersion/kind" (the apiVersion alone for a whole group).
func healthCheckKinds(checks []slice.HealthCheck) string {
	names := make([]string, len(checks))
	for i, hc := range checks {
		names[i] = strings.TrimSuffix(hc.APIVersion+"/"+hc.Kind, "/")
	}
	return strings.Join(names, ",")
}

func orNone(v any) any {
	if s, ok := v.(string); ok && s == "" {
		return "(none)"
	}
	if s, ok := v.(slice.UnitKind); ok && s == "" {
		return "(none)"
	}
	return v
}

// heldPruneWarning says when a cluster's agent will hold the prune this
// change asks for (slice.HoldsPrune, at the agent's default fraction), so
// the reviewer sees that an emptied cluster keeps its workloads.
func heldPruneWarning(name string, base, head *fleetrender.ClusterOutput) string {
	if base == nil || head == nil {
		return ""
	}
	inHead := make(map[string]bool, len(head.Slice.Units))
	for _, u := range head.Slice.Units {
		inHead[u.Name] = true
	}
	gone := 0
	for _, u := range base.Slice.Units {
		if !inHead[u.Name] {
			gone++
		}
	}
	managed := len(base.Slice.Units) + len(head.Slice.Units) - (len(base.Slice.Units) - gone)
	switch {
	case head.Slice.Decommission && len(base.Slice.Units) > 0:
		return fmt.Sprintf("cluster %s is decommissioned: its agent prunes all %s.", name, plural.Count(len(base.Slice.Units), "unit", "units"))
	case slice.HoldsPrune(gone, managed, slice.DefaultPruneHoldFraction, head.Slice.Decommission):
		return fmt.Sprintf("cluster %s: %d of its %s leave its slice; its agent holds this prune (PruneHeld) and deletes nothing until `flotilla cluster decommission %s` is merged.",
			name, gone, plural.Count(managed, "unit", "units"), name)
	}
	return ""
}
