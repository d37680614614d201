package admission

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// Problems Objects reports, for errors.Is on its fleet.FieldErrors (whose
// class prints, and matches, as fleet.ErrInvalidValue).
var (
	// ErrCEL: an expression does not compile.
	ErrCEL = errors.New("CEL expression does not compile")
	// ErrNotPodKind: a pod rule on resources that have no pod spec.
	ErrNotPodKind = errors.New("not a kind with a pod spec")
	// ErrClusterTooOld: a target cluster predates admissionregistration.k8s.io/v1 policies.
	ErrClusterTooOld = errors.New("cluster too old for ValidatingAdmissionPolicy v1")
)

// MinKubernetesVersion is the first Kubernetes release that serves
// ValidatingAdmissionPolicy in admissionregistration.k8s.io/v1 (GA).
var MinKubernetesVersion = version.MajorMinor(1, 30)

// Options tune Objects.
type Options struct {
	// Clusters are the policy's target clusters. Their spec.kubernetesVersion
	// decides the CEL compatibility version (the oldest one's, as its API
	// server checks new expressions: one minor release back); clusters
	// without a version count as the newest this library knows.
	Clusters []*fleet.Cluster
}

// Objects renders a loaded FleetPolicy to its ValidatingAdmissionPolicy and
// binding, both named after the policy. Every expression is compiled as a
// target cluster's API server would compile it; problems come back as a
// fleet.ErrorList naming the policy's file, line and field.
func Objects(p *fleet.FleetPolicy, opts Options) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	g := &generator{p: p}
	compat := g.compatibility(opts.Clusters)
	if len(g.errs) > 0 {
		return nil, nil, g.errs
	}
	chk, err := newChecker(compat)
	if err != nil {
		return nil, nil, err
	}
	g.chk = chk
	spec := g.spec()
	if len(g.errs) > 0 {
		return nil, nil, g.errs
	}
	name := p.Metadata.Name
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       spec,
	}
	actions := p.Spec.ValidationActions
	if len(actions) == 0 {
		actions = []string{fleet.PolicyActionDeny}
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name,
		},
	}
	for _, a := range actions {
		binding.Spec.ValidationActions = append(binding.Spec.ValidationActions, admissionregistrationv1.ValidationAction(a))
	}
	return vap, binding, nil
}

// generator builds one policy's spec and collects its problems.
type generator struct {
	p    *fleet.FleetPolicy
	chk  *checker
	errs fleet.ErrorList
}

func (g *generator) fail(field string, cause error, format string, args ...any) {
	detail := cause.Error()
	if format != "" {
		detail += ": " + fmt.Sprintf(format, args...)
	}
	g.errs = append(g.errs, &fleet.FieldError{
		File: g.p.Source.File, Line: g.p.Lines.Line(field), Field: field,
		Kind: invalid{cause}, Detail: detail,
	})
}

// invalid is the class of this package's problems: printed as fleet's
// "invalid value", and errors.Is finds both that and the cause (ErrCEL…).
type invalid struct{ cause error }

func (e invalid) Error() string   { return fleet.ErrInvalidValue.Error() }
func (e invalid) Unwrap() []error { return []error{fleet.ErrInvalidValue, e.cause} }

// compatibility returns the CEL compatibility version of the target
// clusters and reports one too old for v1 policies.
func (g *generator) compatibility(clusters []*fleet.Cluster) *version.Version {
	compat := environment.DefaultCompatibilityVersion()
	for _, c := range clusters {
		kv := c.Spec.KubernetesVersion
		if kv == "" {
			continue
		}
		v, err := version.ParseGeneric(kv)
		if err != nil {
			continue // Load reports a malformed version
		}
		mm := version.MajorMinor(v.Major(), v.Minor())
		if mm.LessThan(MinKubernetesVersion) {
			g.fail("spec.destination", ErrClusterTooOld, "cluster %s runs Kubernetes %s; policies need %d.%d or later", c.Metadata.Name, kv, MinKubernetesVersion.Major(), MinKubernetesVersion.Minor())
			continue
		}
		// A server accepts in new expressions what its previous minor
		// release understands, so that a rollback keeps working.
		if prev := version.MajorMinor(v.Major(), v.Minor()-1); prev.LessThan(compat) {
			compat = prev
		}
	}
	return compat
}

// spec builds and compiles the policy's spec.
func (g *generator) spec() admissionregistrationv1.ValidatingAdmissionPolicySpec {
	s := g.p.Spec
	fp := admissionregistrationv1.Fail
	if s.FailurePolicy == string(admissionregistrationv1.Ignore) {
		fp = admissionregistrationv1.Ignore
	}
	out := admissionregistrationv1.ValidatingAdmissionPolicySpec{
		FailurePolicy:    &fp,
		MatchConstraints: g.matchConstraints(),
	}
	defaultMatch := s.Match == nil || len(s.Match.ResourceRules) == 0
	needPod, needTemplate := false, false
	for i, r := range s.Rules {
		if isPodRule(r) {
			needPod = true
			g.checkPodKinds(indexField("spec.rules", i), r)
		}
		if r.RequiredLabels != nil && defaultMatch {
			needTemplate = true
		}
	}
	if needPod || needTemplate {
		for _, v := range podVariables {
			if err := g.chk.variable(v.Name, v.Expression); err != nil {
				g.fail("spec.rules", err, "generated variable %s", v.Name)
			}
			out.Variables = append(out.Variables, v)
		}
	}
	if x := s.Exclude; x != nil && len(x.Names) > 0 {
		mc := admissionregistrationv1.MatchCondition{Name: "flotilla-exclude-names", Expression: excludeNames(x.Names)}
		if err := g.chk.condition(mc.Expression); err != nil {
			g.fail("spec.exclude.names", err, "generated match condition")
		}
		out.MatchConditions = append(out.MatchConditions, mc)
	}
	for i, r := range s.Rules {
		field := indexField("spec.rules", i)
		out.Validations = append(out.Validations, g.validations(field, r, defaultMatch)...)
	}
	return out
}

// validations returns a rule's validations, compiled.
func (g *generator) validations(field string, r fleet.PolicyRule, defaultMatch bool) []admissionregistrationv1.Validation {
	if r.CEL != nil {
		v := admissionregistrationv1.Validation{
			Expression:        r.CEL.Expression,
			Message:           r.CEL.Message,
			MessageExpression: r.CEL.MessageExpression,
		}
		if r.CEL.Reason != "" {
			reason := metav1.StatusReason(r.CEL.Reason)
			v.Reason = &reason
		}
		if err := g.chk.condition(v.Expression); err != nil {
			g.fail(field+".cel.expression", err, "")
		}
		if v.MessageExpression != "" {
			if err := g.chk.message(v.MessageExpression); err != nil {
				g.fail(field+".cel.messageExpression", err, "")
			}
		}
		return []admissionregistrationv1.Validation{v}
	}
	built := builtinValidations(r, defaultMatch)
	name := ruleName(r)
	for _, v := range built {
		if err := g.chk.condition(v.Expression); err != nil {
			g.fail(field+"."+name, err, "generated expression")
		}
		if err := g.chk.message(v.MessageExpression); err != nil {
			g.fail(field+"."+name, err, "generated message expression")
		}
	}
	return built
}

// checkPodKinds requires a pod rule's resources to hold pod specs.
func (g *generator) checkPodKinds(field string, r fleet.PolicyRule) {
	m := g.p.Spec.Match
	if m == nil {
		return
	}
	for i, rule := range m.ResourceRules {
		rf := indexField("spec.match.resourceRules", i)
		for _, group := range rule.APIGroups {
			kinds, ok := podKinds[group]
			if !ok {
				g.fail(rf+".apiGroups", ErrNotPodKind, "API group %q has no kinds with a pod spec, and %s (%s) checks pod specs", group, field, ruleName(r))
				continue
			}
			for j, res := range rule.Resources {
				if !kinds[res] {
					g.fail(indexField(rf+".resources", j), ErrNotPodKind, "%s in API group %q has no pod spec, and %s (%s) checks pod specs", res, group, field, ruleName(r))
				}
			}
		}
	}
}

func (g *generator) matchConstraints() *admissionregistrationv1.MatchResources {
	s := g.p.Spec
	mr := &admissionregistrationv1.MatchResources{ResourceRules: defaultResourceRules()}
	var nsSel *metav1.LabelSelector
	if m := s.Match; m != nil {
		if len(m.ResourceRules) > 0 {
			mr.ResourceRules = m.ResourceRules
		}
		if m.NamespaceSelector != nil {
			nsSel = m.NamespaceSelector.DeepCopy()
		}
		if m.ObjectSelector != nil {
			mr.ObjectSelector = m.ObjectSelector.DeepCopy()
		}
	}
	// Exempt namespaces by the name label the API server puts on every
	// namespace, so no matchCondition has to run for them.
	if x := s.Exclude; x != nil && len(x.Namespaces) > 0 {
		if nsSel == nil {
			nsSel = &metav1.LabelSelector{}
		}
		nsSel.MatchExpressions = append(nsSel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key:      corev1NamespaceNameLabel,
			Operator: metav1.LabelSelectorOpNotIn,
			Values:   append([]string(nil), x.Namespaces...),
		})
	}
	mr.NamespaceSelector = nsSel
	return mr
}

// corev1NamespaceNameLabel is set by the API server on every namespace to
// its name (k8s.io/api/core/v1.LabelMetadataName).
const corev1NamespaceNameLabel = "kubernetes.io/metadata.name"

func indexField(field string, i int) string {
	return field + "[" + strconv.Itoa(i) + "]"
}

// celString quotes s as a CEL string literal: single-quoted when that needs
// no escapes (the common case, easier to read in YAML), else Go's quoting,
// whose escapes CEL shares.
func celString(s string) string {
	plain := true
	for _, r := range s {
		if r == '\'' || r == '\\' || r < 0x20 || r == 0x7f {
			plain = false
			break
		}
	}
	if plain {
		return "'" + s + "'"
	}
	return strconv.Quote(s)
}

// celList is a CEL list literal of strings.
func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = celString(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// excludeNames is the match condition that skips the named objects. On
// create the request may carry no name yet (generateName), so the object's
// is used.
func excludeNames(names []string) string {
	return "!((request.name != '' ? request.name : (object != null && has(object.metadata.name) ? object.metadata.name : '')) in " + celList(names) + ")"
}
