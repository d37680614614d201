package kuratorimport

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// FuzzConvert feeds arbitrary bytes, seeded with the golden fixtures,
// through parsing and conversion. It must never panic, every error must be
// a located fleet.ErrorList with a class, and every written path must stay
// under clusters/, fleets/ or apps/ without leaving them.
func FuzzConvert(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*", "*.yaml"))
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(testFleet))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Convert(map[string][]byte{"in.yaml": data}, []string{"in.yaml"})
		if err != nil {
			var l fleet.ErrorList
			if !errors.As(err, &l) || len(l) == 0 {
				t.Fatalf("error %v is not a fleet.ErrorList", err)
			}
			for _, e := range l {
				if e.Kind == nil || e.File != "in.yaml" {
					t.Fatalf("unclassified or unlocated error %q", e)
				}
			}
			return
		}
		for _, p := range res.Paths() {
			if p != filepath.ToSlash(filepath.Clean(p)) || strings.Contains(p, "..") ||
				!(strings.HasPrefix(p, "clusters/") || strings.HasPrefix(p, "fleets/") || strings.HasPrefix(p, "apps/")) {
				t.Fatalf("output path %q leaves the fleet repo layout", p)
			}
		}
		for _, w := range res.Warnings {
			if w.Kind == nil || w.File != "in.yaml" {
				t.Fatalf("unclassified or unlocated warning %q", w)
			}
		}
	})
}
