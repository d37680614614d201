package fleet

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindFleetPolicy is a fleet-wide admission rule: policies/<name>.yaml.
const KindFleetPolicy = "FleetPolicy"

// PoliciesDir holds the FleetPolicies.
const PoliciesDir = "policies"

// Validation actions of a FleetPolicy, as ValidatingAdmissionPolicyBinding
// names them.
const (
	PolicyActionDeny  = "Deny"
	PolicyActionWarn  = "Warn"
	PolicyActionAudit = "Audit"
)

// FleetPolicy is a set of admission rules enforced by the API server of
// every cluster of its destination. hub/admission renders it to a native
// ValidatingAdmissionPolicy and its binding (CEL; no webhook).
type FleetPolicy struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta      `json:"metadata"`
	Spec     FleetPolicySpec `json:"spec"`
	Source   Source          `json:"-"`
	// Lines locates every field, for problems found after loading (an
	// expression that does not compile).
	Lines FieldLines `json:"-"`
}

// FleetPolicySpec says where the rules apply and what a violation does.
type FleetPolicySpec struct {
	// Destination chooses the clusters that enforce the policy.
	Destination Destination `json:"destination"`
	// ValidationActions: any of Deny, Warn, Audit (not Deny with Warn).
	// Default [Deny].
	ValidationActions []string `json:"validationActions,omitempty"`
	// FailurePolicy is what an expression that fails to evaluate does:
	// Fail (default, the request is refused) or Ignore.
	FailurePolicy string `json:"failurePolicy,omitempty"`
	// Match narrows the objects checked. Default: Pods and the workloads
	// that hold pod templates, on create and update.
	Match *PolicyMatch `json:"match,omitempty"`
	// Exclude exempts namespaces and objects by name.
	Exclude *PolicyExclude `json:"exclude,omitempty"`
	// Rules each add one validation; an object must pass all of them.
	Rules []PolicyRule `json:"rules"`
}

// PolicyMatch is a ValidatingAdmissionPolicy's matchConstraints, trimmed
// to what a fleet policy needs.
type PolicyMatch struct {
	// ResourceRules replace the default Pod and workload kinds.
	ResourceRules []admissionregistrationv1.NamedRuleWithOperations `json:"resourceRules,omitempty"`
	// NamespaceSelector limits the policy to namespaces with these labels.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// ObjectSelector limits it to objects with these labels.
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
}

// PolicyExclude exempts objects from the policy.
type PolicyExclude struct {
	// Namespaces whose objects are never checked (kube-system, say).
	Namespaces []string `json:"namespaces,omitempty"`
	// Names of objects that are never checked, in any namespace.
	Names []string `json:"names,omitempty"`
}

// PolicyRule has exactly one rule.
type PolicyRule struct {
	// NoPrivileged refuses containers with securityContext.privileged.
	NoPrivileged *NoPrivilegedRule `json:"noPrivileged,omitempty"`
	// RequiredLabels refuses objects (and pod templates) without these
	// label keys.
	RequiredLabels *RequiredLabelsRule `json:"requiredLabels,omitempty"`
	// AllowedRegistries refuses images from other registries.
	AllowedRegistries *AllowedRegistriesRule `json:"allowedRegistries,omitempty"`
	// ResourceLimitsRequired refuses containers without these limits.
	ResourceLimitsRequired *ResourceLimitsRule `json:"resourceLimitsRequired,omitempty"`
	// CEL is a raw ValidatingAdmissionPolicy validation.
	CEL *CELRule `json:"cel,omitempty"`
}

// NoPrivilegedRule has no settings: `noPrivileged: {}`.
type NoPrivilegedRule struct{}

// RequiredLabelsRule lists label keys every object must carry.
type RequiredLabelsRule struct {
	Labels []string `json:"labels"`
}

// AllowedRegistriesRule lists image prefixes (registry.example.com,
// ghcr.io/acme); a prefix ends at a "/" boundary.
type AllowedRegistriesRule struct {
	Registries []string `json:"registries"`
}

// ResourceLimitsRule lists the resources every container must limit.
// Default [cpu, memory].
type ResourceLimitsRule struct {
	Resources []string `json:"resources,omitempty"`
}

// CELRule is a validation as ValidatingAdmissionPolicy writes it: the
// expression is true for an object that is allowed.
type CELRule struct {
	Expression        string `json:"expression"`
	Message           string `json:"message,omitempty"`
	MessageExpression string `json:"messageExpression,omitempty"`
	// Reason: Unauthorized, Forbidden, Invalid or RequestEntityTooLarge;
	// ValidatingAdmissionPolicy's default is Invalid.
	Reason string `json:"reason,omitempty"`
}
