package fleet

import (
	"os"
	"path"
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
