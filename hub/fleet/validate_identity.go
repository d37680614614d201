package fleet

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// IdentityDefaultNamespace may hold mapped ServiceAccounts without a fleet
// declaring it: every cluster has it.
const IdentityDefaultNamespace = "default"

// maxClustersListed bounds the clusters one message names.
const maxClustersListed = 5

// workloadIdentities checks every fleet's spec.workloadIdentity, then each
// member against it: the member needs a known provider label, a role for
// that provider, and the ServiceAccount's namespace from one of its fleets;
// two fleets sharing a member must not map one ServiceAccount differently.
func (v *validator) workloadIdentities() {
	var withIdentities []*Fleet
	for _, f := range v.r.Fleets {
		if v.valid[f] && len(f.Spec.WorkloadIdentity) > 0 {
			withIdentities = append(withIdentities, f)
			v.identityEntries(f)
		}
	}
	if len(withIdentities) == 0 {
		return
	}
	badProvider := map[*Cluster]bool{}
	for _, f := range withIdentities {
		v.identityMembers(f, badProvider)
	}
	v.identityConflicts()
}

func (v *validator) identityEntries(f *Fleet) {
	d := v.docs[f]
	seen := map[string]int{}
	for i, w := range f.Spec.WorkloadIdentity {
		field := indexPath("spec.workloadIdentity", i)
		if w.Namespace == "" {
			d.errorf(field+".namespace", ErrRequired, "the ServiceAccount's namespace")
		} else {
			dnsLabel(d, field+".namespace", w.Namespace)
		}
		if w.ServiceAccount == "" {
			d.errorf(field+".serviceAccount", ErrRequired, "the ServiceAccount's name")
		} else if errs := validation.IsDNS1123Subdomain(w.ServiceAccount); len(errs) > 0 {
			d.errorf(field+".serviceAccount", ErrInvalidValue, "%q is not a ServiceAccount name: %s", w.ServiceAccount, strings.Join(errs, "; "))
		}
		key := w.Namespace + "/" + w.ServiceAccount
		if j, dup := seen[key]; dup && w.Namespace != "" && w.ServiceAccount != "" {
			d.errorf(field+".serviceAccount", ErrDuplicate, "ServiceAccount %s is already mapped at spec.workloadIdentity[%d]", key, j)
		}
		seen[key] = i
		switch {
		case w.Role == "" && len(w.Roles) == 0:
			d.errorf(field+".role", ErrRequired, "set role (one for every member) or roles (one per provider: %s)", strings.Join(Providers(), ", "))
		case w.Role != "" && len(w.Roles) > 0:
			d.errorf(field+".roles", ErrInvalidValue, "set role or roles, not both")
		}
		for _, p := range sortedKeys(w.Roles) {
			rf := joinPath(field+".roles", p)
			if !KnownProvider(p) {
				d.errorf(rf, ErrInvalidValue, "%q is not a workload identity provider (%s)", p, strings.Join(Providers(), ", "))
				continue
			}
			if msg := roleProblem(p, w.Roles[p]); msg != "" {
				d.errorf(rf, ErrInvalidValue, "%s", msg)
			}
		}
	}
}

// roleProblem describes why role cannot be a role of provider, or "".
func roleProblem(provider, role string) string {
	pr := providerRoles[provider]
	if pr.re.MatchString(role) {
		return ""
	}
	return fmt.Sprintf("%q is not %s role: want %s", role, provider, pr.what)
}

// identityMembers checks the fleet's identities on each of its members.
func (v *validator) identityMembers(f *Fleet, badProvider map[*Cluster]bool) {
	d := v.docs[f]
	var unlabelled []string
	type problem struct {
		field, detail string
		clusters      []string
	}
	problems := map[string]*problem{} // field \x00 detail
	var order []string
	note := func(field, detail, cluster string) {
		k := field + "\x00" + detail
		p := problems[k]
		if p == nil {
			p = &problem{field: field, detail: detail}
			problems[k] = p
			order = append(order, k)
		}
		p.clusters = append(p.clusters, cluster)
	}
	for _, c := range v.r.Members(f) {
		provider, labelled := ClusterProvider(c)
		switch {
		case !labelled:
			unlabelled = append(unlabelled, c.Metadata.Name)
			continue
		case !KnownProvider(provider):
			if !badProvider[c] && v.docs[c] != nil {
				badProvider[c] = true
				v.docs[c].errorf("metadata.labels."+ProviderLabel, ErrInvalidValue,
					"%q is not a workload identity provider (%s); fleet %s (%s) maps workload identities onto this cluster",
					provider, strings.Join(Providers(), ", "), f.Metadata.Name, f.Source.File)
			}
			continue
		}
		namespaces := v.clusterNamespaces(c)
		for i, w := range f.Spec.WorkloadIdentity {
			field := indexPath("spec.workloadIdentity", i)
			if w.Namespace != "" && w.Namespace != IdentityDefaultNamespace && !namespaces[w.Namespace] {
				note(field+".namespace", fmt.Sprintf("namespace %s is not declared by any fleet of the cluster (spec.namespaces); identities are applied before applications, so their namespace must come from a fleet", w.Namespace), c.Metadata.Name)
			}
			switch {
			case w.Role != "" && len(w.Roles) > 0:
				// Reported once by identityEntries.
			case w.Role != "":
				if msg := roleProblem(provider, w.Role); msg != "" {
					note(field+".role", msg+" (use roles for a fleet of several providers)", c.Metadata.Name)
				}
			case len(w.Roles) > 0:
				if _, ok := w.Roles[provider]; !ok {
					note(field+".roles", fmt.Sprintf("no role for provider %s", provider), c.Metadata.Name)
				}
			}
		}
	}
	if len(unlabelled) > 0 {
		d.errorf("spec.workloadIdentity", ErrInvalidValue, "%s no %s label (one of %s), so no identity can be written there",
			describeClusterList(unlabelled, "has", "have"), ProviderLabel, strings.Join(Providers(), ", "))
	}
	for _, k := range order {
		p := problems[k]
		d.errorf(p.field, ErrInvalidValue, "%s (%s)", p.detail, describeClusterList(p.clusters, "", ""))
	}
}

// describeClusterList names a few clusters: "cluster a has", "clusters
// a, b and 3 more have".
func describeClusterList(names []string, one, many string) string {
	sort.Strings(names)
	shown := names
	if len(shown) > maxClustersListed {
		shown = shown[:maxClustersListed]
	}
	s := "cluster " + shown[0]
	verb := one
	if len(names) > 1 {
		s = "clusters " + strings.Join(shown, ", ")
		verb = many
	}
	if len(names) > len(shown) {
		s += fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	if verb != "" {
		s += " " + verb
	}
	return s
}

// clusterNamespaces is the set of namespaces the cluster's fleets declare.
func (v *validator) clusterNamespaces(c *Cluster) map[string]bool {
	out := map[string]bool{}
	for _, f := range v.r.FleetsOf(c) {
		for _, ns := range f.Spec.Namespaces {
			out[ns.Name] = true
		}
	}
	return out
}

// identityConflicts rejects two fleets that map one ServiceAccount to
// different roles on a member they share.
func (v *validator) identityConflicts() {
	type mapping struct {
		fleet *Fleet
		role  string
	}
	reported := map[string]bool{}
	for _, c := range v.r.Clusters {
		provider, ok := ClusterProvider(c)
		if !ok || !KnownProvider(provider) {
			continue
		}
		bySA := map[string]mapping{}
		for _, f := range v.r.FleetsOf(c) {
			if !v.valid[f] {
				continue
			}
			for i, w := range f.Spec.WorkloadIdentity {
				role, ok := w.RoleFor(provider)
				if !ok {
					continue
				}
				key := w.Namespace + "/" + w.ServiceAccount
				prev, seen := bySA[key]
				if !seen {
					bySA[key] = mapping{f, role}
					continue
				}
				if prev.fleet == f || prev.role == role {
					continue
				}
				rk := prev.fleet.Metadata.Name + "\x00" + f.Metadata.Name + "\x00" + key
				if reported[rk] {
					continue
				}
				reported[rk] = true
				v.docs[f].errorf(indexPath("spec.workloadIdentity", i), ErrInvalidValue,
					"ServiceAccount %s is mapped to another %s role by fleet %s (%s); both fleets include cluster %s",
					key, provider, prev.fleet.Metadata.Name, prev.fleet.Source.File, c.Metadata.Name)
			}
		}
	}
}
