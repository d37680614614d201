package fleet

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// fleetExtensions checks the kinds rendered to plain objects in every
// target cluster's slice: traffic routes, fleet policies and the fleets'
// workload identities.
func (v *validator) fleetExtensions() {
	for _, r := range v.r.TrafficRoutes {
		if v.valid[r] {
			v.trafficRoute(r)
		}
	}
	v.routeConflicts()
	for _, p := range v.r.FleetPolicies {
		if v.valid[p] {
			v.fleetPolicy(p)
		}
	}
	v.workloadIdentities()
}

// RouteWeightTotal is what the weights of an HTTP route's destinations
// must add up to.
const RouteWeightTotal = 100

// httpToken is an HTTP header name (RFC 9110 token).
var httpToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (v *validator) trafficRoute(r *TrafficRoute) {
	d := v.docs[r]
	v.meta(d, r.Metadata)
	s := r.Spec
	v.destination(d, "spec.destination", s.Destination)
	if s.Namespace == "" {
		d.errorf("spec.namespace", ErrRequired, "the namespace of the Service and of the generated Istio objects")
	} else {
		dnsLabel(d, "spec.namespace", s.Namespace)
	}
	if s.Host == "" {
		d.errorf("spec.host", ErrRequired, "the Service the route sends traffic to")
	} else if errs := validation.IsDNS1123Subdomain(s.Host); len(errs) > 0 {
		d.errorf("spec.host", ErrInvalidValue, "%q is not a Service name or FQDN: %s", s.Host, strings.Join(errs, "; "))
	}
	seenHosts := map[string]int{}
	for i, h := range s.Hosts {
		f := indexPath("spec.hosts", i)
		if j, dup := seenHosts[h]; dup {
			d.errorf(f, ErrDuplicate, "%q is already listed at spec.hosts[%d]", h, j)
			continue
		}
		seenHosts[h] = i
		var errs []string
		switch {
		case h == "*":
		case strings.HasPrefix(h, "*"):
			errs = validation.IsWildcardDNS1123Subdomain(h)
		default:
			errs = validation.IsDNS1123Subdomain(h)
		}
		if len(errs) > 0 {
			d.errorf(f, ErrInvalidValue, "%q is not a host name: %s", h, strings.Join(errs, "; "))
		}
	}
	for i, g := range s.Gateways {
		if msg := gatewayProblem(g); msg != "" {
			d.errorf(indexPath("spec.gateways", i), ErrInvalidValue, "%q %s", g, msg)
		}
	}
	subsets := map[string]int{}
	if len(s.Subsets) == 0 {
		d.errorf("spec.subsets", ErrRequired, "at least one subset (a version of the Service, by pod labels)")
	}
	for i, sub := range s.Subsets {
		f := indexPath("spec.subsets", i)
		if sub.Name == "" {
			d.errorf(f+".name", ErrRequired, "a subset needs a name")
			continue
		}
		dnsLabel(d, f+".name", sub.Name)
		if j, dup := subsets[sub.Name]; dup {
			d.errorf(f+".name", ErrDuplicate, "subset %q is already declared at spec.subsets[%d]", sub.Name, j)
		}
		subsets[sub.Name] = i
		if len(sub.Labels) == 0 {
			d.errorf(f+".labels", ErrRequired, "the pod labels of this version, such as version: %s", sub.Name)
		}
		checkLabels(d, f+".labels", sub.Labels)
	}
	if len(s.HTTP) == 0 {
		d.errorf("spec.http", ErrRequired, "at least one HTTP route")
	}
	names := map[string]int{}
	for i, h := range s.HTTP {
		f := indexPath("spec.http", i)
		if h.Name != "" {
			if j, dup := names[h.Name]; dup {
				d.errorf(f+".name", ErrDuplicate, "HTTP route %q is already declared at spec.http[%d]", h.Name, j)
			}
			names[h.Name] = i
		}
		for j, m := range h.Match {
			checkHTTPMatch(d, indexPath(f+".match", j), m)
		}
		v.routeDestinations(d, f+".route", h.Route, subsets)
		if h.Headers != nil {
			checkHeaderChanges(d, f+".headers.request", h.Headers.Request)
			checkHeaderChanges(d, f+".headers.response", h.Headers.Response)
		}
	}
}

// gatewayProblem checks an Istio gateway reference: mesh, or
// [<namespace>/]<name>.
func gatewayProblem(g string) string {
	if g == "mesh" {
		return ""
	}
	ns, name, found := strings.Cut(g, "/")
	if !found {
		ns, name = "", g
	}
	if ns != "" || found {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return "is not a gateway: invalid namespace: " + strings.Join(errs, "; ")
		}
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "is not a gateway ([<namespace>/]<name> or mesh): " + strings.Join(errs, "; ")
	}
	return ""
}

func (v *validator) routeDestinations(d *document, field string, route []RouteDestination, subsets map[string]int) {
	if len(route) == 0 {
		d.errorf(field, ErrRequired, "at least one destination subset")
		return
	}
	seen := map[string]int{}
	sum, complete := int64(0), true
	for i, dest := range route {
		f := indexPath(field, i)
		switch {
		case dest.Subset == "":
			d.errorf(f+".subset", ErrRequired, "one of the subsets declared in spec.subsets")
		default:
			if j, dup := seen[dest.Subset]; dup {
				d.errorf(f+".subset", ErrDuplicate, "subset %q is already a destination at %s", dest.Subset, indexPath(field, j))
			}
			seen[dest.Subset] = i
			if _, ok := subsets[dest.Subset]; !ok {
				d.errorf(f+".subset", ErrDanglingReference, "no subset named %q in spec.subsets", dest.Subset)
			}
		}
		if d.has(f+".port") && (dest.Port < 1 || dest.Port > 65535) {
			d.errorf(f+".port", ErrInvalidValue, "%d is not a port (1-65535)", dest.Port)
		}
		switch w := dest.Weight; {
		case w == nil:
			complete = false
			if len(route) > 1 {
				d.errorf(f+".weight", ErrRequired, "with several destinations every one needs a weight; they sum to %d", RouteWeightTotal)
			}
		case *w < 0 || *w > RouteWeightTotal:
			complete = false
			d.errorf(f+".weight", ErrInvalidValue, "%d is not a percentage (0-%d)", *w, RouteWeightTotal)
		default:
			sum += int64(*w)
		}
	}
	if complete && sum != RouteWeightTotal {
		if len(route) == 1 {
			d.errorf(indexPath(field, 0)+".weight", ErrInvalidValue, "a single destination takes all the traffic: leave the weight out or set %d", RouteWeightTotal)
			return
		}
		d.errorf(field, ErrInvalidValue, "the weights sum to %d; they must sum to %d", sum, RouteWeightTotal)
	}
}

func checkHTTPMatch(d *document, field string, m HTTPMatch) {
	if m.URI == nil && len(m.Headers) == 0 && len(m.QueryParams) == 0 {
		d.errorf(field, ErrRequired, "set uri, headers or queryParams (leave match out to match every request)")
		return
	}
	if m.URI != nil {
		checkStringMatch(d, field+".uri", *m.URI)
	}
	for _, name := range sortedKeys(m.Headers) {
		f := joinPath(field+".headers", name)
		switch {
		case !httpToken.MatchString(name):
			d.errorf(f, ErrInvalidValue, "%q is not an HTTP header name", name)
		case strings.ToLower(name) != name:
			d.errorf(f, ErrInvalidValue, "header names in a match are lower case: %q", strings.ToLower(name))
		}
		checkStringMatch(d, f, m.Headers[name])
	}
	for _, name := range sortedKeys(m.QueryParams) {
		f := joinPath(field+".queryParams", name)
		if name == "" {
			d.errorf(f, ErrInvalidValue, "empty query parameter name")
		}
		checkStringMatch(d, f, m.QueryParams[name])
	}
}

// checkStringMatch requires exactly one of exact, prefix and regex, and a
// regex that compiles (Istio's proxies use RE2, as Go does).
func checkStringMatch(d *document, field string, m StringMatch) {
	set := 0
	for _, isSet := range []bool{d.has(field + ".exact"), d.has(field + ".prefix"), d.has(field + ".regex")} {
		if isSet {
			set++
		}
	}
	switch {
	case set == 0:
		d.errorf(field, ErrRequired, "set one of exact, prefix or regex")
	case set > 1:
		d.errorf(field, ErrInvalidValue, "set only one of exact, prefix or regex")
	case m.Regex != "":
		if _, err := regexp.Compile(m.Regex); err != nil {
			d.errorf(field+".regex", ErrInvalidValue, "not an RE2 regular expression: %v", err)
		}
	}
}

func checkHeaderChanges(d *document, field string, h *HeaderChanges) {
	if h == nil {
		return
	}
	check := func(f, name string) {
		if !httpToken.MatchString(name) {
			d.errorf(f, ErrInvalidValue, "%q is not an HTTP header name", name)
		}
	}
	for _, name := range sortedKeys(h.Set) {
		check(joinPath(field+".set", name), name)
	}
	for _, name := range sortedKeys(h.Add) {
		check(joinPath(field+".add", name), name)
	}
	for i, name := range h.Remove {
		check(indexPath(field+".remove", i), name)
	}
}

// routeConflicts rejects two routes for one Service on one cluster: their
// DestinationRules would both claim the host, and Istio would pick one.
func (v *validator) routeConflicts() {
	claims := map[string]*TrafficRoute{}
	reported := map[string]bool{}
	for _, r := range v.r.TrafficRoutes {
		if !v.valid[r] || r.Spec.Namespace == "" || r.Spec.Host == "" {
			continue
		}
		for _, c := range v.r.Resolve(r.Spec.Destination) {
			key := c.Metadata.Name + "\x00" + r.Spec.Namespace + "\x00" + r.Spec.Host
			prev, taken := claims[key]
			if !taken {
				claims[key] = r
				continue
			}
			pair := prev.Metadata.Name + "\x00" + r.Metadata.Name
			if reported[pair] {
				continue
			}
			reported[pair] = true
			v.docs[r].errorf("spec.host", ErrDuplicate, "%s",
				fmt.Sprintf("route %s (%s) already routes host %s in namespace %s on cluster %s; one route per Service and cluster",
					prev.Metadata.Name, prev.Source.File, r.Spec.Host, r.Spec.Namespace, c.Metadata.Name))
		}
	}
}
