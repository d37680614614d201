package fleetrender_test

import (
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// TestSuspend: spec.suspend marks the application's unit suspended in
// each cluster's slice; a sync policy's suspend overrides it on its
// clusters, by the precedence of policies; the slice file carries it.
func TestSuspend(t *testing.T) {
	base := map[string]string{
		"clusters/a.yaml":    "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: a\n",
		"clusters/b.yaml":    "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: b\n  labels: {ring: canary}\n",
		"fleets/prod.yaml":   "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  clusters: [a, b]\n",
		"apps/web/m/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: default\n",
	}
	appFile := func(spec string) string {
		return "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: web\nspec:\n  source:\n    manifests: {path: m}\n" + spec
	}
	tests := []struct {
		name string
		app  string
		want map[string]bool // cluster → suspended
	}{
		{"not suspended", appFile("  syncPolicies:\n    - destination: {fleet: prod}\n"), map[string]bool{"a": false, "b": false}},
		{"suspended", appFile("  suspend: true\n  syncPolicies:\n    - destination: {fleet: prod}\n"), map[string]bool{"a": true, "b": true}},
		{"one destination suspended", appFile("  syncPolicies:\n    - destination: {fleet: prod}\n    - destination: {clusters: [b]}\n      suspend: true\n"),
			map[string]bool{"a": false, "b": true}},
		{"a more specific policy resumes", appFile("  suspend: true\n  syncPolicies:\n    - destination: {fleet: prod}\n    - destination: {selector: {matchLabels: {ring: canary}}}\n      suspend: false\n"),
			map[string]bool{"a": true, "b": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := compileFiles(t, base, map[string]string{"apps/web/app.yaml": tt.app})
			for _, co := range out.Clusters {
				var web *slice.Unit
				for i := range co.Slice.Units {
					if co.Slice.Units[i].Name == "web" {
						web = &co.Slice.Units[i]
					}
				}
				if web == nil {
					t.Fatalf("cluster %s has no web unit", co.Slice.Cluster)
				}
				want := tt.want[co.Slice.Cluster]
				if web.Suspend != want {
					t.Errorf("cluster %s: suspend %v, want %v", co.Slice.Cluster, web.Suspend, want)
				}
				if got := strings.Contains(string(slice.Marshal(co.Slice)), "\n  suspend: true\n"); got != want {
					t.Errorf("cluster %s: slice.yaml says suspend: %v, want %v", co.Slice.Cluster, got, want)
				}
			}
		})
	}
}
