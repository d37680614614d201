package fleet

import (
	"context"
	"testing"
)

// TestApplicationLines: a loaded application locates its fields, so the
// compiler's problems (a dependsOn entry not deployed to the same cluster)
// name the entry's line rather than the document's.
func TestApplicationLines(t *testing.T) {
	db := "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: db\nspec:\n" + manifestsSource +
		"  syncPolicies:\n    - destination:\n        fleet: prod\n"
	web := app(manifestsSource + // lines 6-8
		"  dependsOn:\n" + // 9
		"    - db\n" + // 10
		"  syncPolicies:\n" + // 11
		"    - destination:\n" + // 12
		"        fleet: prod\n") // 13
	r, err := Load(context.Background(), writeRepo(t, map[string]string{
		"apps/web/app.yaml": web, "apps/db/app.yaml": db, "apps/db/manifests/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db}\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	a := r.Application("web")
	for field, want := range map[string]int{
		"spec.dependsOn[0]":                      10,
		"spec.dependsOn":                         9,
		"spec.syncPolicies[0].destination.fleet": 13,
		"spec.syncPolicies[0].overrides.values":  12, // absent: its nearest written ancestor
		"metadata.name":                          4,
	} {
		if got := a.Line(field); got != want {
			t.Errorf("Line(%q) = %d, want %d", field, got, want)
		}
	}
	built := &Application{Source: Source{File: "apps/x/app.yaml", Line: 1}}
	if got := built.Line("spec.dependsOn[0]"); got != 1 {
		t.Errorf("an application built in code: Line = %d, want its document's line 1", got)
	}
}
