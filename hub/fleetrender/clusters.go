package fleetrender

import (
	"fmt"
	"path"
	"runtime"
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// compileClusters compiles every cluster, in name order. Drafting a
// cluster shares memoised units with the clusters before it, so it runs on
// this goroutine, in order; finishing a draft (dependency order, slice.yaml,
// the file list) is independent per cluster and runs on a bounded pool
// alongside, so both cores work. Results and errors are kept by index, so
// the output does not depend on scheduling.
func (c *compiler) compileClusters(clusters []*fleet.Cluster) ([]*ClusterOutput, error) {
	results := make([]*ClusterOutput, len(clusters))
	cycles := make([]error, len(clusters))
	drafts := make([]*clusterDraft, len(clusters))
	var mu sync.Mutex
	done := 0
	progress := func() {
		if c.opts.Progress == nil {
			return
		}
		mu.Lock()
		done++
		c.opts.Progress(done, len(clusters))
		mu.Unlock()
	}
	work := make(chan int, 256)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i], cycles[i] = drafts[i].finish()
				drafts[i] = nil
				progress()
			}
		}()
	}
	var err error
	for i, cl := range clusters {
		if err = c.ctx.Err(); err != nil {
			break
		}
		if drafts[i] = c.draftCluster(cl); drafts[i] == nil {
			progress()
		}
	}
	// Every unit's objects are known before any slice is finished: two
	// units claiming one object is an error, and an application's copy
	// of a fleet namespace changes both units (ownership.go).
	var objects map[*unitContent]*unitObjects
	if err == nil {
		objects, err = c.renderContents(drafts)
	}
	for i, d := range drafts {
		if err != nil {
			break
		}
		if d == nil {
			continue
		}
		if !c.resolveOwnership(d, objects) {
			drafts[i] = nil
			progress()
			continue
		}
		c.checkNamespaces(d, objects)
		waitForVolcano(d, objects)
		work <- i
	}
	close(work)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	out := make([]*ClusterOutput, 0, len(clusters))
	for i, co := range results {
		if cycles[i] != nil {
			cl := clusters[i]
			c.errs.add(cl.Source.File, cl.Source.Line, "", fleet.ErrDependencyCycle, cl.Metadata.Name, cycles[i].Error())
			continue
		}
		if co != nil {
			out = append(out, co)
		}
	}
	return out, nil
}

// clusterDraft is a cluster's units, dependencies set, before ordering.
type clusterDraft struct {
	cl           *fleet.Cluster
	cluster      string
	decommission bool
	units        []slice.Unit
	contents     map[string]*unitContent
	// apps are the application units' applications.
	apps map[string]*fleet.Application
}

// finish orders the draft's units and lays out its files. It touches no
// compiler state, so drafts finish concurrently.
func (d *clusterDraft) finish() (*ClusterOutput, error) {
	ordered, err := topoSort(d.units)
	if err != nil {
		return nil, err
	}
	s := &slice.Slice{APIVersion: slice.APIVersion, Kind: slice.Kind, Cluster: d.cluster, Decommission: d.decommission, Units: ordered}
	files := make([]File, 0, 1+2*len(ordered))
	files = append(files, File{Path: slice.SlicePath(d.cluster), Data: slice.Marshal(s)})
	for _, u := range ordered {
		for _, f := range d.contents[u.Name].files {
			files = append(files, File{Path: u.Path + "/" + f.name, Data: f.data})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return &ClusterOutput{Slice: s, Files: files}, nil
}

// draftCluster gathers one cluster's units; nil when it has errors
// (recorded in c.errs).
func (c *compiler) draftCluster(cl *fleet.Cluster) *clusterDraft {
	name := cl.Metadata.Name
	if cl.Spec.Decommission {
		// No units, and the marker that lets the agent prune them all.
		return &clusterDraft{cl: cl, cluster: name, decommission: true}
	}
	type pending struct {
		unit    slice.Unit
		content *unitContent
		app     *fleet.Application
	}
	var units []pending
	nsContent := c.namespacesUnit(cl)
	if nsContent != nil {
		units = append(units, pending{
			unit: slice.Unit{
				Name: slice.UnitNamespaces, Kind: slice.UnitManifests, Path: slice.UnitDir(name, slice.UnitNamespaces),
				Prune: true, Wait: true, Timeout: metav1.Duration{Duration: fleet.DefaultTimeout},
				Hash: nsContent.hash,
			},
			content: nsContent,
		})
	}
	present := map[string]bool{}
	failed := false
	fleetExtra, ok := c.fleetUnits(cl, nsContent != nil)
	failed = !ok
	for _, fu := range fleetExtra {
		units = append(units, pending{unit: fu.unit, content: fu.content})
	}
	volcanoExtra, vok := c.volcanoUnits(cl, append(appPrerequisites(fleetExtra), namespaceDeps(nsContent)...))
	failed = failed || !vok
	for _, vu := range volcanoExtra {
		units = append(units, pending{unit: vu.unit, content: vu.content})
	}
	for _, p := range c.apps {
		if p.broken {
			continue
		}
		var matched []*policyPlan
		for _, pp := range p.policies {
			if pp.clusters[name] {
				matched = append(matched, pp)
			}
		}
		if len(matched) == 0 {
			continue
		}
		content := c.appUnit(p, matched, cl)
		if content == nil {
			failed = true
			continue
		}
		a := p.app
		u := slice.Unit{
			Name:       a.Metadata.Name,
			Kind:       p.kind,
			Path:       slice.UnitDir(name, a.Metadata.Name),
			Prune:      a.PruneEnabled(),
			AllowEmpty: a.Spec.AllowEmpty,
			Wait:       a.WaitEnabled(),
			Timeout:    metav1.Duration{Duration: a.TimeoutOrDefault()},
			// Fail fast unless the application waits out its timeout.
			WaitForTimeout: !a.FailFastEnabled(),
			HealthChecks:   sliceHealthChecks(c.repo.HealthChecksOn(a, cl)),
			Namespace:      content.namespace,
			Hash:           content.hash,
			Inputs:         p.inputs,
			Suspend:        a.SuspendedOn(policiesOf(matched)),
		}
		if p.kind == slice.UnitHelm {
			release := a.Spec.Source.Helm.ReleaseName
			if release == "" {
				release = a.Metadata.Name
			}
			u.Helm = &slice.HelmRelease{Chart: p.chartDir, ReleaseName: release, Values: path.Join(u.Path, slice.ValuesFile)}
		}
		var kept bool
		if u, content, kept = c.holdUnit(p, cl, u, content); !kept {
			failed = true
			continue
		}
		present[a.Metadata.Name] = true
		units = append(units, pending{unit: u, content: content, app: a})
	}
	for i := range units {
		a := units[i].app
		if a == nil {
			continue
		}
		var deps []string
		if nsContent != nil {
			deps = append(deps, slice.UnitNamespaces)
		}
		deps = append(deps, appPrerequisites(fleetExtra)...)
		for j, d := range a.Spec.DependsOn {
			if !present[d] {
				c.field(a, fmt.Sprintf("spec.dependsOn[%d]", j), fleet.ErrDanglingReference, name,
					"%s depends on %s, which is not deployed to the same cluster", a.Metadata.Name, d)
				failed = true
				continue
			}
			deps = append(deps, d)
		}
		sort.Strings(deps)
		units[i].unit.DependsOn = dedupeSorted(deps)
	}
	if failed {
		return nil
	}
	d := &clusterDraft{cl: cl, cluster: name, units: make([]slice.Unit, len(units)), contents: make(map[string]*unitContent, len(units)), apps: map[string]*fleet.Application{}}
	for i, u := range units {
		d.units[i] = u.unit
		d.contents[u.unit.Name] = u.content
		if u.app != nil {
			d.apps[u.unit.Name] = u.app
		}
	}
	return d
}

func dedupeSorted(s []string) []string {
	if len(s) < 2 {
		return s
	}
	out := s[:1]
	for _, v := range s[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

// policiesOf is the sync policies of plans, in their order.
func policiesOf(plans []*policyPlan) []*fleet.SyncPolicy {
	out := make([]*fleet.SyncPolicy, len(plans))
	for i, pp := range plans {
		out[i] = pp.policy
	}
	return out
}

func sliceHealthChecks(checks []fleet.CustomHealthCheck) []slice.HealthCheck {
	if len(checks) == 0 {
		return nil
	}
	out := make([]slice.HealthCheck, len(checks))
	for i, hc := range checks {
		out[i] = slice.HealthCheck(hc)
	}
	return out
}
