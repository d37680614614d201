package fleetrender

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/admission"
	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/identity"
	"github.com/flotilla-gitops/flotilla/hub/traffic"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// The units generated from fleet-wide kinds. A cluster's policies are
// applied before everything else but its namespaces need nothing (they are
// cluster-scoped), its identities (ServiceAccounts) and routes after its
// namespaces and policies, and every application after all of them — so
// no pod starts unchecked or without its cloud identity.

// Generated file names inside those units.
const (
	policyFilePrefix    = "policy-"
	routeFilePrefix     = "route-"
	ServiceAccountsFile = "serviceaccounts.yaml"
)

// fleetUnit is one generated unit of a cluster.
type fleetUnit struct {
	unit    slice.Unit
	content *unitContent
}

// fleetUnitState holds what compiling the fleet-wide kinds derives once:
// which clusters each route and policy targets, their rendered files, and
// the units shared by clusters with the same inputs.
type fleetUnitState struct {
	routes   []*targeted
	policies []*targeted
	memo     map[string]*unitContent
}

// targeted is a route or policy, its clusters and its rendered file.
type targeted struct {
	name     string
	source   fleet.Source
	clusters map[string]bool
	targets  []*fleet.Cluster
	// render produces the file once, on first use; nil data after a
	// reported failure.
	render   func() ([]byte, error)
	rendered bool
	data     []byte
}

func (c *compiler) fleetUnitState() *fleetUnitState {
	if c.fleetState != nil {
		return c.fleetState
	}
	s := &fleetUnitState{memo: map[string]*unitContent{}}
	for _, r := range c.repo.TrafficRoutes {
		r := r
		s.routes = append(s.routes, c.target(r.Metadata.Name, r.Source, r.Spec.Destination, func() ([]byte, error) {
			objs := traffic.Objects(r)
			docs := make([]any, len(objs))
			for i, o := range objs {
				docs[i] = o.Object
			}
			return marshalObjects(docs...)
		}))
	}
	for _, p := range c.repo.FleetPolicies {
		p := p
		var t *targeted
		t = c.target(p.Metadata.Name, p.Source, p.Spec.Destination, func() ([]byte, error) {
			vap, binding, err := admission.Objects(p, admission.Options{Clusters: t.targets})
			if err != nil {
				var list fleet.ErrorList
				if errors.As(err, &list) {
					for _, fe := range list {
						c.errs.add(fe.File, fe.Line, fe.Field, fe.Kind, "", fe.Detail)
					}
					return nil, nil
				}
				return nil, err
			}
			return marshalObjects(vap, binding)
		})
		s.policies = append(s.policies, t)
	}
	c.fleetState = s
	return s
}

func (c *compiler) target(name string, src fleet.Source, dest fleet.Destination, render func() ([]byte, error)) *targeted {
	t := &targeted{name: name, source: src, clusters: map[string]bool{}, render: render}
	t.targets = c.repo.Resolve(dest)
	for _, cl := range t.targets {
		t.clusters[cl.Metadata.Name] = true
	}
	return t
}

// fleetUnits returns the cluster's policy, identity and route units, with
// their dependencies set; ok is false after a reported problem.
func (c *compiler) fleetUnits(cl *fleet.Cluster, hasNamespaces bool) (units []fleetUnit, ok bool) {
	s := c.fleetUnitState()
	name := cl.Metadata.Name
	ok = true
	unit := func(unitName string, content *unitContent, deps ...string) {
		units = append(units, fleetUnit{
			unit: slice.Unit{
				Name: unitName, Kind: slice.UnitManifests, Path: slice.UnitDir(name, unitName),
				DependsOn: append([]string(nil), deps...),
				Prune:     true, Wait: true, Timeout: metav1.Duration{Duration: fleet.DefaultTimeout},
				Hash: content.hash,
			},
			content: content,
		})
	}
	var before []string // what identities and routes wait for
	if hasNamespaces {
		before = append(before, slice.UnitNamespaces)
	}
	if content, good := c.targetedUnit(s, "policies", policyFilePrefix, s.policies, name); !good {
		ok = false
	} else if content != nil {
		unit(slice.UnitPolicies, content)
		before = append(before, slice.UnitPolicies)
	}
	if content, good := c.identityUnit(s, cl); !good {
		ok = false
	} else if content != nil {
		unit(slice.UnitIdentity, content, before...)
	}
	if content, good := c.targetedUnit(s, "routes", routeFilePrefix, s.routes, name); !good {
		ok = false
	} else if content != nil {
		unit(slice.UnitRoutes, content, before...)
	}
	return units, ok
}

// appPrerequisites are the generated units every application of the
// cluster depends on: its policies and its identities.
func appPrerequisites(units []fleetUnit) []string {
	var out []string
	for _, u := range units {
		if u.unit.Name == slice.UnitPolicies || u.unit.Name == slice.UnitIdentity {
			out = append(out, u.unit.Name)
		}
	}
	return out
}

// targetedUnit is the unit holding one file per route or policy that
// targets the cluster; nil when none does. Clusters targeted by the same
// ones share it.
func (c *compiler) targetedUnit(s *fleetUnitState, kind, prefix string, all []*targeted, cluster string) (*unitContent, bool) {
	var mine []*targeted
	key := kind
	for _, t := range all {
		if t.clusters[cluster] {
			mine = append(mine, t)
			key += "\x00" + t.name
		}
	}
	if len(mine) == 0 {
		return nil, true
	}
	if u, seen := s.memo[key]; seen {
		return u, u != nil
	}
	ok := true
	var files []unitFile
	var resources []string
	for _, t := range mine {
		if !t.rendered {
			t.rendered = true
			data, err := t.render()
			if err != nil {
				c.errs.add(t.source.File, t.source.Line, "", fleet.ErrInvalidValue, "", fmt.Sprintf("render %s %s: %v", strings.TrimSuffix(kind, "s"), t.name, err))
			}
			t.data = data
		}
		if t.data == nil {
			ok = false
			continue
		}
		file := prefix + t.name + ".yaml"
		files = append(files, unitFile{name: file, data: t.data})
		resources = append(resources, file)
	}
	if !ok {
		s.memo[key] = nil
		return nil, false
	}
	u, err := manifestsUnit(resources, files)
	if err != nil {
		c.errs.add("", 0, "", fleet.ErrInvalidValue, cluster, fmt.Sprintf("generate %s: %v", kind, err))
		return nil, false
	}
	s.memo[key] = u
	return u, true
}

// identityUnit is the unit of the ServiceAccounts the cluster's fleets map
// to cloud roles; nil when they map none. Clusters of one provider in the
// same fleets share it.
func (c *compiler) identityUnit(s *fleetUnitState, cl *fleet.Cluster) (*unitContent, bool) {
	var fleets []*fleet.Fleet
	provider, _ := fleet.ClusterProvider(cl)
	key := "identity\x00" + provider
	for _, f := range c.repo.FleetsOf(cl) {
		if len(f.Spec.WorkloadIdentity) > 0 {
			fleets = append(fleets, f)
			key += "\x00" + f.Metadata.Name
		}
	}
	if len(fleets) == 0 {
		return nil, true
	}
	if u, seen := s.memo[key]; seen {
		return u, u != nil
	}
	sas, err := identity.ServiceAccounts(cl, fleets)
	if err != nil {
		// Load rejects these inputs; a Repo built otherwise lands here.
		c.errs.add(cl.Source.File, cl.Source.Line, "metadata.labels."+fleet.ProviderLabel, fleet.ErrInvalidValue, cl.Metadata.Name, err.Error())
		s.memo[key] = nil
		return nil, false
	}
	docs := make([]any, len(sas))
	for i, sa := range sas {
		docs[i] = sa
	}
	data, err := marshalObjects(docs...)
	if err == nil {
		var u *unitContent
		u, err = manifestsUnit([]string{ServiceAccountsFile}, []unitFile{{name: ServiceAccountsFile, data: data}})
		if err == nil {
			s.memo[key] = u
			return u, true
		}
	}
	c.errs.add(cl.Source.File, cl.Source.Line, "", fleet.ErrInvalidValue, cl.Metadata.Name, fmt.Sprintf("generate identities: %v", err))
	return nil, false
}

// nameFirst puts "name" first in every mapping that has one (a list of
// named entries reads better that way), the other keys sorted.
func nameFirst(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(orderedMap, 0, len(t))
		if n, ok := t["name"]; ok {
			out = append(out, field{"name", nameFirst(n)})
		}
		for _, k := range sortedKeys(t) {
			if k != "name" {
				out = append(out, field{k, nameFirst(t[k])})
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = nameFirst(e)
		}
		return out
	}
	return v
}

// manifestsUnit is a unit of generated files and the kustomization.yaml
// listing them.
func manifestsUnit(resources []string, files []unitFile) (*unitContent, error) {
	kust, err := marshalKustomization("", resources, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	all := append([]unitFile{{name: KustomizationFile, data: kust}}, files...)
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	return &unitContent{files: all, hash: unitHash(all, "")}, nil
}

// marshalObjects writes Kubernetes objects (typed or unstructured) as one
// generated file: apiVersion, kind and metadata first, then the other
// fields with sorted keys; server-set and empty fields (creationTimestamp,
// status) are left out.
func marshalObjects(objs ...any) ([]byte, error) {
	docs := make([]any, len(objs))
	for i, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		delete(m, "status")
		doc := orderedMap{{"apiVersion", m["apiVersion"]}, {"kind", m["kind"]}}
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
			md := orderedMap{}.add("name", meta["name"]).add("namespace", meta["namespace"])
			for _, k := range sortedKeys(meta) {
				if k != "name" && k != "namespace" {
					md = md.add(k, meta[k])
				}
			}
			doc = append(doc, field{"metadata", md})
		}
		for _, k := range sortedKeys(m) {
			switch k {
			case "apiVersion", "kind", "metadata":
			default:
				doc = doc.add(k, nameFirst(m[k]))
			}
		}
		docs[i] = doc
	}
	return marshalDocs(docs...)
}
