package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitDocCounts: what init's help and the template's README say the
// template holds matches what it holds.
func TestInitDocCounts(t *testing.T) {
	count := func(pattern string) int {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(templateDir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}
	words := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	word := func(n int) string {
		t.Helper()
		if n >= len(words) {
			t.Fatalf("%d is more than the test spells out", n)
		}
		return words[n]
	}
	clusters, fleets, apps := count("clusters/*.yaml"), count("fleets/*.yaml"), count("apps/*/app.yaml")
	routes, policies := count("routes/*.yaml"), count("policies/*.yaml")
	if routes != 1 || policies != 1 {
		t.Fatalf("the texts below name one route and one policy; the template has %d and %d", routes, policies)
	}
	readme, err := os.ReadFile(filepath.Join(templateDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for doc, wants := range map[string][]string{
		"flotilla init --help": {
			word(clusters) + " example clusters", word(fleets) + " fleets", word(apps) + " applications",
			"a canary\nroute, an admission policy",
		},
		"fleet-repo-template/README.md": {
			word(clusters) + " clusters, " + word(fleets) + " fleets, " + word(apps) + " applications, a canary\nroute, an admission policy",
		},
	} {
		text := string(readme)
		if doc == "flotilla init --help" {
			text = newInitCommand().Long
		}
		for _, w := range wants {
			if !strings.Contains(text, w) {
				t.Errorf("%s lacks %q", doc, w)
			}
		}
	}
}
