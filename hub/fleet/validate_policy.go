package fleet

import (
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Values ValidatingAdmissionPolicy accepts, checked here so that a typo is
// reported at its line rather than by each cluster's API server.
var (
	policyActions        = map[string]bool{PolicyActionDeny: true, PolicyActionWarn: true, PolicyActionAudit: true}
	policyFailurePolicy  = map[string]bool{"Fail": true, "Ignore": true}
	policyReasons        = map[string]bool{"Unauthorized": true, "Forbidden": true, "Invalid": true, "RequestEntityTooLarge": true}
	policyOperations     = map[string]bool{"CREATE": true, "UPDATE": true, "DELETE": true, "CONNECT": true, "*": true}
	policyScopes         = map[string]bool{"": true, "Cluster": true, "Namespaced": true, "*": true}
	registryPrefixSyntax = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.:_/-]*$`)
)

func (v *validator) fleetPolicy(p *FleetPolicy) {
	d := v.docs[p]
	v.meta(d, p.Metadata)
	s := p.Spec
	v.destination(d, "spec.destination", s.Destination)
	seen := map[string]int{}
	for i, a := range s.ValidationActions {
		f := indexPath("spec.validationActions", i)
		if !policyActions[a] {
			d.errorf(f, ErrInvalidValue, "%q is not Deny, Warn or Audit", a)
			continue
		}
		if j, dup := seen[a]; dup {
			d.errorf(f, ErrDuplicate, "%s is already listed at spec.validationActions[%d]", a, j)
		}
		seen[a] = i
	}
	if _, deny := seen[PolicyActionDeny]; deny {
		if i, warn := seen[PolicyActionWarn]; warn {
			d.errorf(indexPath("spec.validationActions", i), ErrInvalidValue, "Deny and Warn exclude each other: a denied request has no warnings")
		}
	}
	if d.has("spec.validationActions") && len(s.ValidationActions) == 0 {
		d.errorf("spec.validationActions", ErrRequired, "at least one of Deny, Warn or Audit (or leave it out for Deny)")
	}
	if fp := s.FailurePolicy; fp != "" && !policyFailurePolicy[fp] {
		d.errorf("spec.failurePolicy", ErrInvalidValue, "%q is not Fail or Ignore", fp)
	}
	if m := s.Match; m != nil {
		for i, rule := range m.ResourceRules {
			checkResourceRule(d, indexPath("spec.match.resourceRules", i), rule.Operations, rule.APIGroups, rule.APIVersions, rule.Resources, rule.Scope)
		}
		if m.NamespaceSelector != nil {
			checkSelector(d, "spec.match.namespaceSelector", m.NamespaceSelector)
		}
		if m.ObjectSelector != nil {
			checkSelector(d, "spec.match.objectSelector", m.ObjectSelector)
		}
	}
	if x := s.Exclude; x != nil {
		names := map[string]int{}
		for i, ns := range x.Namespaces {
			f := indexPath("spec.exclude.namespaces", i)
			dnsLabel(d, f, ns)
			if j, dup := names[ns]; dup {
				d.errorf(f, ErrDuplicate, "%q is already listed at spec.exclude.namespaces[%d]", ns, j)
			}
			names[ns] = i
		}
		names = map[string]int{}
		for i, n := range x.Names {
			f := indexPath("spec.exclude.names", i)
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				d.errorf(f, ErrInvalidValue, "%q is not an object name: %s", n, strings.Join(errs, "; "))
			}
			if j, dup := names[n]; dup {
				d.errorf(f, ErrDuplicate, "%q is already listed at spec.exclude.names[%d]", n, j)
			}
			names[n] = i
		}
	}
	if len(s.Rules) == 0 {
		d.errorf("spec.rules", ErrRequired, "at least one rule")
	}
	for i, r := range s.Rules {
		checkPolicyRule(d, indexPath("spec.rules", i), r)
	}
}

func checkResourceRule(d *document, field string, ops []admissionregistrationv1.OperationType, groups, versions, resources []string, scope *admissionregistrationv1.ScopeType) {
	if len(ops) == 0 {
		d.errorf(field+".operations", ErrRequired, "CREATE, UPDATE, DELETE, CONNECT or *")
	}
	for i, op := range ops {
		if !policyOperations[string(op)] {
			d.errorf(indexPath(field+".operations", i), ErrInvalidValue, "%q is not CREATE, UPDATE, DELETE, CONNECT or *", op)
		}
	}
	for _, l := range []struct {
		name string
		list []string
		what string
	}{
		{"apiGroups", groups, `API groups ("" for the core group, * for all)`},
		{"apiVersions", versions, "API versions (* for all)"},
		{"resources", resources, "resources such as deployments or pods (* for all)"},
	} {
		if len(l.list) == 0 {
			d.errorf(field+"."+l.name, ErrRequired, "%s", l.what)
		}
	}
	if scope != nil && !policyScopes[string(*scope)] {
		d.errorf(field+".scope", ErrInvalidValue, "%q is not Cluster, Namespaced or *", *scope)
	}
}

func checkPolicyRule(d *document, field string, r PolicyRule) {
	set := 0
	for _, isSet := range []bool{r.NoPrivileged != nil, r.RequiredLabels != nil, r.AllowedRegistries != nil, r.ResourceLimitsRequired != nil, r.CEL != nil} {
		if isSet {
			set++
		}
	}
	const kinds = "noPrivileged, requiredLabels, allowedRegistries, resourceLimitsRequired or cel"
	switch {
	case set == 0:
		d.errorf(field, ErrRequired, "set one of %s", kinds)
		return
	case set > 1:
		d.errorf(field, ErrInvalidValue, "set only one of %s; use one list entry per rule", kinds)
		return
	}
	switch {
	case r.RequiredLabels != nil:
		f := field + ".requiredLabels.labels"
		if len(r.RequiredLabels.Labels) == 0 {
			d.errorf(f, ErrRequired, "the label keys every object must carry")
		}
		seen := map[string]int{}
		for i, k := range r.RequiredLabels.Labels {
			lf := indexPath(f, i)
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				d.errorf(lf, ErrInvalidValue, "invalid label key %q: %s", k, strings.Join(errs, "; "))
			}
			if j, dup := seen[k]; dup {
				d.errorf(lf, ErrDuplicate, "%q is already listed at %s", k, indexPath(f, j))
			}
			seen[k] = i
		}
	case r.AllowedRegistries != nil:
		f := field + ".allowedRegistries.registries"
		if len(r.AllowedRegistries.Registries) == 0 {
			d.errorf(f, ErrRequired, "the registries (or registry/path prefixes) images may come from")
		}
		seen := map[string]int{}
		for i, reg := range r.AllowedRegistries.Registries {
			rf := indexPath(f, i)
			switch {
			case strings.Contains(reg, "://"):
				d.errorf(rf, ErrInvalidValue, "%q: write the registry as images name it, without a scheme (registry.example.com)", reg)
			case !registryPrefixSyntax.MatchString(reg) || strings.Contains(reg, "//"):
				d.errorf(rf, ErrInvalidValue, "%q is not a registry or registry/path prefix", reg)
			}
			if j, dup := seen[reg]; dup {
				d.errorf(rf, ErrDuplicate, "%q is already listed at %s", reg, indexPath(f, j))
			}
			seen[reg] = i
		}
	case r.ResourceLimitsRequired != nil:
		f := field + ".resourceLimitsRequired.resources"
		if d.has(f) && len(r.ResourceLimitsRequired.Resources) == 0 {
			d.errorf(f, ErrRequired, "the resources every container must limit (or leave it out for cpu and memory)")
		}
		seen := map[string]int{}
		for i, res := range r.ResourceLimitsRequired.Resources {
			rf := indexPath(f, i)
			if errs := validation.IsQualifiedName(res); len(errs) > 0 {
				d.errorf(rf, ErrInvalidValue, "%q is not a resource name: %s", res, strings.Join(errs, "; "))
			}
			if j, dup := seen[res]; dup {
				d.errorf(rf, ErrDuplicate, "%q is already listed at %s", res, indexPath(f, j))
			}
			seen[res] = i
		}
	case r.CEL != nil:
		f := field + ".cel"
		if strings.TrimSpace(r.CEL.Expression) == "" {
			d.errorf(f+".expression", ErrRequired, "a CEL expression that is true for an allowed object")
		}
		if strings.ContainsAny(r.CEL.Message, "\r\n") {
			d.errorf(f+".message", ErrInvalidValue, "a message is one line")
		}
		if reason := r.CEL.Reason; reason != "" && !policyReasons[reason] {
			d.errorf(f+".reason", ErrInvalidValue, "%q is not Unauthorized, Forbidden, Invalid or RequestEntityTooLarge", reason)
		}
	}
}
