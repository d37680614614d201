package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestDestinationFleetAndSelector: fleet with selector selects the fleet's
// members the selector matches; clusters with either is an error.
func TestDestinationFleetAndSelector(t *testing.T) {
	tests := []struct {
		name    string
		dest    string
		want    string // clusters selected
		warning string // substring of the only warning, if any
		err     string // substring of the error, if any
	}{
		{name: "fleet narrowed by selector", dest: "        fleet: prod\n        selector: {matchLabels: {region: eu}}\n", want: "member1"},
		{name: "selector alone is not narrowed", dest: "        selector: {matchLabels: {env: prod}}\n", want: "member1,member2"},
		{name: "selector matching no member", dest: "        fleet: prod\n        selector: {matchLabels: {region: ap}}\n",
			warning: "apps/web/app.yaml:12: spec.syncPolicies[0].destination.selector: selector matches no cluster: the selector matches no member of fleet prod"},
		{name: "clusters with fleet", dest: "        fleet: prod\n        clusters: [member1]\n",
			err: "apps/web/app.yaml:10: spec.syncPolicies[0].destination: invalid value: clusters names the clusters itself; set it without fleet or selector"},
		{name: "clusters with selector", dest: "        selector: {matchLabels: {region: eu}}\n        clusters: [member1]\n",
			err: "set it without fleet or selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeRepo(t, map[string]string{"apps/web/app.yaml": app(manifestsSource + "  syncPolicies:\n    - destination:\n" + tt.dest)})
			r, err := Load(context.Background(), root)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrInvalidValue) {
					t.Fatalf("Load() error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a := r.Application("web")
			if got := names(r.Resolve(a.Spec.SyncPolicies[0].Destination)); got != tt.want {
				t.Errorf("Resolve = %q, want %q", got, tt.want)
			}
			switch {
			case tt.warning == "" && len(r.Warnings) != 0:
				t.Errorf("warnings %v, want none", r.Warnings)
			case tt.warning != "" && (len(r.Warnings) != 1 || r.Warnings[0].Error() != tt.warning):
				t.Errorf("warnings %v, want %q", r.Warnings, tt.warning)
			}
		})
	}
}

// TestUnknownFieldSuggestion: an unknown field names the close known
// field of the same level, and only a close one.
func TestUnknownFieldSuggestion(t *testing.T) {
	tests := []struct {
		name string
		file string
		body string
		want string
	}{
		{"typo in a list item", "apps/web/app.yaml", app(manifestsSource + "  syncPolicies:\n    - destinaton: {fleet: prod}\n"),
			`apps/web/app.yaml:10: spec.syncPolicies[0].destinaton: unknown field: not a field of this kind; did you mean "destination"?`},
		{"nested struct", "apps/web/app.yaml", app(manifestsSource + "  syncPolicies:\n    - destination:\n        flet: prod\n"),
			`apps/web/app.yaml:11: spec.syncPolicies[0].destination.flet: unknown field: not a field of this kind; did you mean "fleet"?`},
		{"wrong case", "apps/web/app.yaml", app(manifestsSource + "  dependson: []\n  syncPolicies:\n    - destination: {fleet: prod}\n"),
			`apps/web/app.yaml:9: spec.dependson: unknown field: not a field of this kind; did you mean "dependsOn"?`},
		{"transposition", "clusters/member1.yaml", "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: member1\nspec:\n  capcaity: {cpu: 1}\n",
			`clusters/member1.yaml:6: spec.capcaity: unknown field: not a field of this kind; did you mean "capacity"?`},
		{"metadata", "fleets/prod.yaml", "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\n  label: {a: b}\nspec:\n  clusters: [member1]\n",
			`fleets/prod.yaml:5: metadata.label: unknown field: not a field of this kind; did you mean "labels"?`},
		{"inside a selector", "fleets/prod.yaml", "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: prod\nspec:\n  selector:\n    matchLabel: {env: prod}\n",
			`fleets/prod.yaml:7: spec.selector.matchLabel: unknown field: not a field of this kind; did you mean "matchLabels"?`},
		{"nothing close", "apps/web/app.yaml", app(manifestsSource + "  bogus: 1\n  syncPolicies:\n    - destination: {fleet: prod}\n"),
			`apps/web/app.yaml:9: spec.bogus: unknown field: not a field of this kind`},
		{"beside a type error", "apps/web/app.yaml", app(manifestsSource + "  timeout: 5x\n  waitt: true\n  syncPolicies:\n    - destination: {fleet: prod}\n"),
			`apps/web/app.yaml:10: spec.waitt: unknown field: not a field of this kind; did you mean "wait"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(context.Background(), writeRepo(t, map[string]string{tt.file: tt.body}))
			var l ErrorList
			if !errors.As(err, &l) {
				t.Fatalf("Load() error = %v, want an ErrorList", err)
			}
			for _, e := range l {
				if errors.Is(e, ErrUnknownField) {
					if e.Error() != tt.want {
						t.Fatalf("unknown field error\n got %s\nwant %s", e, tt.want)
					}
					return
				}
			}
			t.Fatalf("no unknown-field error in %v", err)
		})
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"fleet", "fleet", 0}, {"fleet", "flet", 1}, {"fleet", "flete", 1},
		{"capacity", "capcaity", 1}, {"abc", "xyz", 3}, {"", "abc", 3},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
