package admission

import (
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// podKinds are the resources, by API group, that hold a pod spec: Pods
// and the workloads with pod templates. Checking the workloads too makes
// the apply of a bad Deployment fail, instead of its ReplicaSet failing
// quietly to create pods later.
var podKinds = map[string]map[string]bool{
	"":      {"pods": true, "replicationcontrollers": true},
	"apps":  {"deployments": true, "replicasets": true, "statefulsets": true, "daemonsets": true},
	"batch": {"jobs": true, "cronjobs": true},
}

// defaultResourceRules match podKinds on create and update.
func defaultResourceRules() []admissionregistrationv1.NamedRuleWithOperations {
	ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	rule := func(group string, resources ...string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources},
		}}
	}
	return []admissionregistrationv1.NamedRuleWithOperations{
		rule("", "pods", "replicationcontrollers"),
		rule("apps", "deployments", "replicasets", "statefulsets", "daemonsets"),
		rule("batch", "jobs", "cronjobs"),
	}
}

// podVariables find the pod template and containers of any pod kind.
// dyn() keeps the API server's per-kind type check quiet about the fields
// the other kinds have; each is evaluated only when a validation uses it.
var podVariables = []admissionregistrationv1.Variable{
	{Name: "podTemplate", Expression: "object.kind == 'CronJob' ? dyn(object).spec.jobTemplate.spec.template : dyn(object).spec.template"},
	{Name: "podSpec", Expression: "object.kind == 'Pod' ? dyn(object).spec : variables.podTemplate.spec"},
	{Name: "containers", Expression: "(has(variables.podSpec.containers) ? variables.podSpec.containers : []) + (has(variables.podSpec.initContainers) ? variables.podSpec.initContainers : [])"},
	{Name: "allContainers", Expression: "variables.containers + (has(variables.podSpec.ephemeralContainers) ? variables.podSpec.ephemeralContainers : [])"},
}

// DefaultLimitedResources are what resourceLimitsRequired wants limited
// when it names none.
var DefaultLimitedResources = []string{"cpu", "memory"}

func isPodRule(r fleet.PolicyRule) bool {
	return r.NoPrivileged != nil || r.AllowedRegistries != nil || r.ResourceLimitsRequired != nil
}

// ruleName is the field name of the rule a PolicyRule holds.
func ruleName(r fleet.PolicyRule) string {
	switch {
	case r.NoPrivileged != nil:
		return "noPrivileged"
	case r.RequiredLabels != nil:
		return "requiredLabels"
	case r.AllowedRegistries != nil:
		return "allowedRegistries"
	case r.ResourceLimitsRequired != nil:
		return "resourceLimitsRequired"
	}
	return "cel"
}

// builtinValidations writes a built-in rule as validations, each with a
// messageExpression naming what is wrong and a static message for when
// that cannot be evaluated.
func builtinValidations(r fleet.PolicyRule, defaultMatch bool) []admissionregistrationv1.Validation {
	forbidden := metav1.StatusReasonForbidden
	v := func(expr, message, messageExpr string) admissionregistrationv1.Validation {
		return admissionregistrationv1.Validation{Expression: expr, Message: message, MessageExpression: messageExpr, Reason: &forbidden}
	}
	switch {
	case r.NoPrivileged != nil:
		const privileged = "has(c.securityContext) && has(c.securityContext.privileged) && c.securityContext.privileged == true"
		return []admissionregistrationv1.Validation{v(
			"!variables.allContainers.exists(c, "+privileged+")",
			"privileged containers are not allowed",
			"'privileged containers are not allowed: ' + variables.allContainers.filter(c, "+privileged+").map(c, c.name).join(', ')",
		)}
	case r.RequiredLabels != nil:
		keys := celList(r.RequiredLabels.Labels)
		list := strings.Join(r.RequiredLabels.Labels, ", ")
		out := []admissionregistrationv1.Validation{v(
			keys+".all(l, has(object.metadata.labels) && l in object.metadata.labels)",
			"required labels are missing: "+list,
			"'required labels are missing: ' + "+keys+".filter(l, !has(object.metadata.labels) || !(l in object.metadata.labels)).join(', ')",
		)}
		if defaultMatch {
			// A workload's pods carry its template's labels, not its own.
			const tmpl = "has(variables.podTemplate.metadata) && has(variables.podTemplate.metadata.labels)"
			out = append(out, v(
				"object.kind == 'Pod' || "+keys+".all(l, "+tmpl+" && l in variables.podTemplate.metadata.labels)",
				"required labels are missing from the pod template: "+list,
				"'required labels are missing from the pod template: ' + "+keys+".filter(l, !("+tmpl+" && l in variables.podTemplate.metadata.labels)).join(', ')",
			))
		}
		return out
	case r.AllowedRegistries != nil:
		prefixes := celList(registryPrefixes(r.AllowedRegistries.Registries))
		allowed := prefixes + ".exists(p, c.image.startsWith(p))"
		return []admissionregistrationv1.Validation{v(
			"variables.allContainers.all(c, "+allowed+")",
			"images must come from "+strings.Join(r.AllowedRegistries.Registries, ", "),
			"'images from registries that are not allowed: ' + variables.allContainers.filter(c, !("+allowed+")).map(c, c.image).join(', ')",
		)}
	case r.ResourceLimitsRequired != nil:
		resources := r.ResourceLimitsRequired.Resources
		if len(resources) == 0 {
			resources = DefaultLimitedResources
		}
		limited := "has(c.resources) && has(c.resources.limits) && " + celList(resources) + ".all(r, r in c.resources.limits)"
		list := strings.Join(resources, ", ")
		return []admissionregistrationv1.Validation{v(
			"variables.containers.all(c, "+limited+")",
			"every container must limit "+list,
			celString("containers without "+list+" limits: ")+" + variables.containers.filter(c, !("+limited+")).map(c, c.name).join(', ')",
		)}
	}
	return nil
}

// registryPrefixes end every allowed registry at a "/" boundary, so that
// registry.example.com does not allow registry.example.com.evil.io.
func registryPrefixes(regs []string) []string {
	out := make([]string, len(regs))
	for i, r := range regs {
		if !strings.HasSuffix(r, "/") {
			r += "/"
		}
		out[i] = r
	}
	return out
}
