package traffic

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// The Istio API the objects use.
const (
	APIVersion          = "networking.istio.io/v1"
	KindVirtualService  = "VirtualService"
	KindDestinationRule = "DestinationRule"
)

// Objects renders a route loaded by hub/fleet to its VirtualService and
// DestinationRule, both named after the route, in the route's namespace:
//
//	apiVersion: networking.istio.io/v1
//	kind: VirtualService
//	metadata: {name: <route>, namespace: <spec.namespace>}
//	spec:
//	  hosts: <spec.hosts, default [spec.host]>
//	  gateways: <spec.gateways, if any>
//	  http:
//	  - name: <name, if any>
//	    match: [{uri: {prefix: /}, headers: {x-user-role: {exact: beta-tester}}, queryParams: {…}}]
//	    route:
//	    - destination: {host: <spec.host>, subset: v1, port: {number: 8080}}
//	      weight: 90
//	    headers: {request: {set: {…}, add: {…}, remove: […]}, response: {…}}
//	---
//	apiVersion: networking.istio.io/v1
//	kind: DestinationRule
//	metadata: {name: <route>, namespace: <spec.namespace>}
//	spec:
//	  host: <spec.host>
//	  subsets: [{name: v1, labels: {version: v1}}, …]
func Objects(r *fleet.TrafficRoute) []*unstructured.Unstructured {
	s := r.Spec
	meta := func() map[string]any {
		return map[string]any{"name": r.Metadata.Name, "namespace": s.Namespace}
	}
	hosts := s.Hosts
	if len(hosts) == 0 {
		hosts = []string{s.Host}
	}
	vsSpec := map[string]any{"hosts": anyList(hosts)}
	if len(s.Gateways) > 0 {
		vsSpec["gateways"] = anyList(s.Gateways)
	}
	http := make([]any, 0, len(s.HTTP))
	for _, h := range s.HTTP {
		http = append(http, httpRoute(s.Host, h))
	}
	vsSpec["http"] = http
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion,
		"kind":       KindVirtualService,
		"metadata":   meta(),
		"spec":       vsSpec,
	}}
	subsets := make([]any, 0, len(s.Subsets))
	for _, sub := range s.Subsets {
		subsets = append(subsets, map[string]any{"name": sub.Name, "labels": stringMap(sub.Labels)})
	}
	dr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion,
		"kind":       KindDestinationRule,
		"metadata":   meta(),
		"spec":       map[string]any{"host": s.Host, "subsets": subsets},
	}}
	return []*unstructured.Unstructured{vs, dr}
}

func httpRoute(host string, h fleet.HTTPRoute) map[string]any {
	out := map[string]any{}
	if h.Name != "" {
		out["name"] = h.Name
	}
	if len(h.Match) > 0 {
		matches := make([]any, 0, len(h.Match))
		for _, m := range h.Match {
			mm := map[string]any{}
			if m.URI != nil {
				mm["uri"] = stringMatch(*m.URI)
			}
			if len(m.Headers) > 0 {
				mm["headers"] = stringMatches(m.Headers)
			}
			if len(m.QueryParams) > 0 {
				mm["queryParams"] = stringMatches(m.QueryParams)
			}
			matches = append(matches, mm)
		}
		out["match"] = matches
	}
	route := make([]any, 0, len(h.Route))
	for _, d := range h.Route {
		dest := map[string]any{"host": host, "subset": d.Subset}
		if d.Port > 0 {
			dest["port"] = map[string]any{"number": int64(d.Port)}
		}
		rd := map[string]any{"destination": dest}
		if d.Weight != nil {
			rd["weight"] = int64(*d.Weight)
		}
		route = append(route, rd)
	}
	out["route"] = route
	if h.Headers != nil {
		headers := map[string]any{}
		if c := headerChanges(h.Headers.Request); c != nil {
			headers["request"] = c
		}
		if c := headerChanges(h.Headers.Response); c != nil {
			headers["response"] = c
		}
		if len(headers) > 0 {
			out["headers"] = headers
		}
	}
	return out
}

func stringMatch(m fleet.StringMatch) map[string]any {
	switch {
	case m.Prefix != "":
		return map[string]any{"prefix": m.Prefix}
	case m.Regex != "":
		return map[string]any{"regex": m.Regex}
	}
	return map[string]any{"exact": m.Exact}
}

func stringMatches(ms map[string]fleet.StringMatch) map[string]any {
	out := make(map[string]any, len(ms))
	for k, m := range ms {
		out[k] = stringMatch(m)
	}
	return out
}

func headerChanges(c *fleet.HeaderChanges) map[string]any {
	if c == nil {
		return nil
	}
	out := map[string]any{}
	if len(c.Set) > 0 {
		out["set"] = stringMap(c.Set)
	}
	if len(c.Add) > 0 {
		out["add"] = stringMap(c.Add)
	}
	if len(c.Remove) > 0 {
		rm := append([]string(nil), c.Remove...)
		sort.Strings(rm)
		out["remove"] = anyList(rm)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func anyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
