package render

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Hook events a Helm hook may name (helm.sh/hook), as Helm spells them.
const (
	HookPreInstall   = string(release.HookPreInstall)
	HookPostInstall  = string(release.HookPostInstall)
	HookPreUpgrade   = string(release.HookPreUpgrade)
	HookPostUpgrade  = string(release.HookPostUpgrade)
	HookPreDelete    = string(release.HookPreDelete)
	HookPostDelete   = string(release.HookPostDelete)
	HookPreRollback  = string(release.HookPreRollback)
	HookPostRollback = string(release.HookPostRollback)
)

// Hook delete policies (helm.sh/hook-delete-policy).
const (
	HookBeforeCreation = string(release.HookBeforeHookCreation)
	HookSucceeded      = string(release.HookSucceeded)
	HookFailed         = string(release.HookFailed)
)

// Hook is one Helm hook of a helm unit: an object the chart annotates
// helm.sh/hook, which the agent runs around the unit's apply rather than
// applying it with the unit's objects.
type Hook struct {
	// Object after the unit's kustomization (namespace, images, patches),
	// annotations kept.
	Object *unstructured.Unstructured
	// Events from helm.sh/hook, in the annotation's order.
	Events []string
	// Weight from helm.sh/hook-weight (0 when absent or not an integer, as
	// in Helm).
	Weight int
	// DeletePolicies from helm.sh/hook-delete-policy; before-hook-creation
	// when the annotation is absent, as in Helm.
	DeletePolicies []string
}

var (
	knownHookEvents = []string{
		HookPreInstall, HookPostInstall, HookPreUpgrade, HookPostUpgrade,
		HookPreDelete, HookPostDelete, HookPreRollback, HookPostRollback,
	}
	knownDeletePolicies = []string{HookBeforeCreation, HookSucceeded, HookFailed}
)

// splitHooks moves the objects annotated helm.sh/hook out of objs (sorted
// by sortObjects) into hooks ordered as Helm runs them (see helmHookOrder).
// Test hooks never get here (Unit's Helm output leaves them out), but one
// added by the unit's kustomization is dropped too.
func splitHooks(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, []Hook, error) {
	var hooks []Hook
	kept := objs[:0:0]
	for _, o := range objs {
		ann := o.GetAnnotations()
		events, ok := ann[release.HookAnnotation]
		if !ok {
			kept = append(kept, o)
			continue
		}
		h := Hook{Object: o}
		test := false
		for e := range strings.SplitSeq(events, ",") {
			e = strings.ToLower(strings.TrimSpace(e))
			switch {
			case e == string(release.HookTest) || e == "test-success":
				test = true
			case slices.Contains(knownHookEvents, e):
				h.Events = append(h.Events, e)
			default:
				return nil, nil, classed(ErrInvalidObject, fmt.Sprintf("hook %s %s: unknown helm.sh/hook event %q", o.GetKind(), nsName(o), e))
			}
		}
		if test {
			continue
		}
		// Helm ignores a weight that is not an integer.
		h.Weight, _ = strconv.Atoi(strings.TrimSpace(ann[release.HookWeightAnnotation]))
		if policies, ok := ann[release.HookDeleteAnnotation]; ok {
			for p := range strings.SplitSeq(policies, ",") {
				p = strings.ToLower(strings.TrimSpace(p))
				if p == "" {
					continue
				}
				if !slices.Contains(knownDeletePolicies, p) {
					return nil, nil, classed(ErrInvalidObject, fmt.Sprintf("hook %s %s: unknown helm.sh/hook-delete-policy %q", o.GetKind(), nsName(o), p))
				}
				h.DeletePolicies = append(h.DeletePolicies, p)
			}
		}
		if len(h.DeletePolicies) == 0 {
			h.DeletePolicies = []string{HookBeforeCreation}
		}
		hooks = append(hooks, h)
	}
	slices.SortStableFunc(hooks, helmHookOrder)
	return kept, hooks, nil
}

// helmHookOrder is the order in which Helm's install and upgrade actions
// run the hooks of one event: by weight, then by name (action's
// hookByWeight), then by kind in Helm's install order, unknown kinds last
// and alphabetically (releaseutil's sort by kind, which hookByWeight's
// stable sort keeps). Hooks equal in all three keep their order in objs,
// where Helm would keep the chart's file order, which the render no longer
// knows.
func helmHookOrder(a, b Hook) int {
	if c := cmp.Compare(a.Weight, b.Weight); c != 0 {
		return c
	}
	if c := strings.Compare(a.Object.GetName(), b.Object.GetName()); c != 0 {
		return c
	}
	ka, kb := a.Object.GetKind(), b.Object.GetKind()
	if c := cmp.Compare(helmKindRank(ka), helmKindRank(kb)); c != 0 {
		return c
	}
	return strings.Compare(ka, kb) // both unknown to Helm's install order
}

// helmKindRank is kind's place in Helm's install order; every unknown
// kind ranks after the known ones.
func helmKindRank(kind string) int {
	if i := slices.Index(releaseutil.InstallOrder, kind); i >= 0 {
		return i
	}
	return len(releaseutil.InstallOrder)
}

func nsName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}
