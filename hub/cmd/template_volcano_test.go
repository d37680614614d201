package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTemplateVolcanoPin: the template's README vendors the Volcano chart
// of the version the tests pin (tools/volcano/go.mod), which the e2e test
// TestVolcanoUpstreamChart installs, and names the example application
// the template holds.
func TestTemplateVolcanoPin(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "..", "tools", "volcano", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^require volcano\.sh/volcano (v\S+)$`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("tools/volcano/go.mod does not require volcano.sh/volcano")
	}
	pin := "volcano.sh/volcano@" + string(m[1])
	readme, err := os.ReadFile(filepath.Join(templateDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	mentions := regexp.MustCompile(`volcano\.sh/volcano@v[0-9.]+`).FindAllString(string(readme), -1)
	if len(mentions) == 0 {
		t.Fatal("the template README does not say how to vendor the Volcano chart")
	}
	for _, got := range mentions {
		if got != pin {
			t.Errorf("the template README vendors %s, the tests pin %s", got, pin)
		}
	}
	const example = "apps/volcano/app.yaml.example"
	if !strings.Contains(string(readme), example) {
		t.Errorf("the template README does not name %s", example)
	}
	if _, err := os.Stat(filepath.Join(templateDir, filepath.FromSlash(example))); err != nil {
		t.Error(err)
	}
}
