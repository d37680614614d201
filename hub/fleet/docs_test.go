package fleet

import (
	"os"
	"path"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// docExample is a complete document in docs/fleet-repo.md: a yaml block
// whose first line names its file.
var docExample = regexp.MustCompile("(?s)```yaml\n# ([a-z0-9/.-]+\\.yaml)\n(apiVersion:.*?)```")

// TestDocsExamples decodes every complete example of docs/fleet-repo.md
// strictly, so the documentation cannot drift from the field names.
func TestDocsExamples(t *testing.T) {
	md, err := os.ReadFile("../../docs/fleet-repo.md")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{"clusters": KindCluster, "fleets": KindFleet, "apps": KindApplication, "jobs": KindGlobalJob,
		"routes": KindTrafficRoute, "policies": KindFleetPolicy}
	matches := docExample.FindAllSubmatch(md, -1)
	if len(matches) < 5 {
		t.Fatalf("found %d examples", len(matches))
	}
	for _, m := range matches {
		file := string(m[1])
		kind := kinds[strings.SplitN(file, "/", 2)[0]]
		switch {
		case strings.HasPrefix(file, ProvidersDir+"/"):
			kind = KindProvider
		case strings.HasPrefix(file, AlertsDir+"/"):
			kind = KindAlert
		}
		name := strings.TrimSuffix(path.Base(file), ".yaml")
		if kind == KindApplication {
			name = path.Base(path.Dir(file))
		}
		d, _, ok := decodeDocument(file, m[2], kind, name)
		if !ok || len(d.errs) > 0 {
			t.Errorf("%s: %v", file, d.errs)
		}
	}
}

// TestDocsCoverEveryField: every field of every kind is named in
// docs/fleet-repo.md — as a YAML key in an example or in backquotes in a
// table — so a field added to the types cannot go undocumented.
func TestDocsCoverEveryField(t *testing.T) {
	md, err := os.ReadFile("../../docs/fleet-repo.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []any{Cluster{}, Fleet{}, Application{}, GlobalJob{}, TrafficRoute{}, FleetPolicy{}, Provider{}, Alert{}} {
		typ := reflect.TypeOf(kind)
		for _, field := range fieldPaths(typ, typ.Name(), map[reflect.Type]bool{}) {
			leaf := field[strings.LastIndex(field, ".")+1:]
			named := regexp.MustCompile("(^|[\\s`.])" + regexp.QuoteMeta(leaf) + "(\\[\\])?(`|:)")
			if !named.Match(md) {
				t.Errorf("%s is not documented in docs/fleet-repo.md", field)
			}
		}
	}
}

// fieldPaths lists the JSON field paths of t and of the structs of this
// package it holds (types of other packages, such as Kubernetes label
// selectors, are documented where they are defined).
func fieldPaths(t reflect.Type, prefix string, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || t.PkgPath() != reflect.TypeOf(Cluster{}).PkgPath() {
		return nil
	}
	seen[t] = true
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" { // embedded: its fields are this type's
			out = append(out, fieldPaths(f.Type, prefix, seen)...)
			continue
		}
		out = append(out, prefix+"."+name)
		out = append(out, fieldPaths(f.Type, prefix+"."+name, seen)...)
	}
	return out
}
