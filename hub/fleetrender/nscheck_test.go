package fleetrender_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// TestUndeclaredNamespaceWarning: an application whose objects go to a
// namespace that nothing creates on the cluster is a warning naming the
// field that sets the namespace; a namespace a fleet declares, one the
// application ships, or a built-in one is not.
func TestUndeclaredNamespaceWarning(t *testing.T) {
	base := map[string]string{
		"clusters/a.yaml":             "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: a\n",
		"clusters/b.yaml":             "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: b\n",
		"apps/web/m/cm.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n",
		"apps/other/m/cm.yaml":        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: tools\n",
		"apps/other/m/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: tools\n",
	}
	fleetFile := func(namespaces string) string {
		return "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters: [a, b]\n" + namespaces
	}
	appFile := func(name, spec string) string {
		return "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: " + name + "\nspec:\n  source:\n    manifests: {path: m}\n" + spec
	}
	tests := []struct {
		name  string
		files map[string]string
		want  []string // the warnings, in full
	}{
		{
			name: "spec.namespace declared by no fleet",
			files: map[string]string{
				"fleets/prod.yaml":  fleetFile(""),
				"apps/web/app.yaml": appFile("web", "  namespace: shop\n  syncPolicies:\n    - destination: {fleet: prod}\n"),
			},
			want: []string{"apps/web/app.yaml:8: spec.namespace: namespace declared by no fleet: application web puts objects in namespace shop, " +
				"which no fleet of the cluster declares (spec.namespaces) and no unit creates; the agent does not create namespaces, so its apply will fail there (clusters a, b)"},
		},
		{
			name: "override on one cluster",
			files: map[string]string{
				"fleets/prod.yaml":  fleetFile("  namespaces: [{name: shop}]\n"),
				"apps/web/app.yaml": appFile("web", "  namespace: shop\n  syncPolicies:\n    - destination: {fleet: prod}\n    - destination: {clusters: [b]}\n      overrides:\n        namespace: shop-b\n"),
			},
			want: []string{"apps/web/app.yaml:13: spec.syncPolicies[1].overrides.namespace: namespace declared by no fleet: application web puts objects in namespace shop-b, " +
				"which no fleet of the cluster declares (spec.namespaces) and no unit creates; the agent does not create namespaces, so its apply will fail there (cluster b)"},
		},
		{
			name: "declared, shipped by an application, built in",
			files: map[string]string{
				"fleets/prod.yaml":    fleetFile("  namespaces: [{name: shop}]\n"),
				"apps/web/app.yaml":   appFile("web", "  namespace: shop\n  syncPolicies:\n    - destination: {fleet: prod}\n"),
				"apps/other/app.yaml": appFile("other", "  syncPolicies:\n    - destination: {fleet: prod}\n"),
				"apps/sys/app.yaml":   appFile("sys", "  namespace: kube-system\n  syncPolicies:\n    - destination: {fleet: prod}\n"),
				"apps/sys/m/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sys\n",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := compileFiles(t, base, tt.files)
			var got []string
			for _, w := range out.Warnings {
				if errors.Is(w, fleetrender.ErrUndeclaredNamespace) {
					got = append(got, w.Error())
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("warnings\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// compileFiles compiles a repo of the union of layers (later ones win).
func compileFiles(t *testing.T, layers ...map[string]string) *fleetrender.Output {
	t.Helper()
	root := t.TempDir()
	for _, files := range layers {
		treefile.Write(t, root, files)
	}
	return compileRepo(t, root, fleetrender.Options{})
}
