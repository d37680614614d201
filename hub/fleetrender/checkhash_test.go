package fleetrender_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// TestAgentHashAgrees: every unit the hub writes passes the check the agent
// makes before rendering it (slice.CheckHash over the committed tree), and
// a source pushed without re-rendering fails it with ErrSourceStale while
// an edit of app.yaml alone (not hashed) does not.
func TestAgentHashAgrees(t *testing.T) {
	root := copyTree(t, templateDir)
	slices := map[string]*slice.Slice{}
	for _, cl := range []string{"member1", "member2", "edge-1"} {
		s, err := slice.Read(root, cl)
		if err != nil {
			t.Fatal(err)
		}
		slices[cl] = s
	}
	h := slice.NewTreeHasher(root)
	for cl, s := range slices {
		for _, u := range s.Units {
			if err := slice.CheckHash(h, u); err != nil {
				t.Errorf("%s/%s: %v", cl, u.Name, err)
			}
		}
	}

	nginx := findUnit(t, slices["member1"], "nginx")
	if len(nginx.Inputs) == 0 {
		t.Fatalf("nginx has no inputs")
	}
	appendFile(t, filepath.Join(root, "apps", "nginx", "app.yaml"), "# comment\n")
	if err := slice.CheckHash(slice.NewTreeHasher(root), nginx); err != nil {
		t.Errorf("after an app.yaml edit: %v", err)
	}
	appendFile(t, filepath.Join(root, "apps", "nginx", "base", "kustomization.yaml"), "# unreviewed\n")
	if err := slice.CheckHash(slice.NewTreeHasher(root), nginx); !errors.Is(err, slice.ErrSourceStale) {
		t.Errorf("after a source edit: err = %v, want ErrSourceStale", err)
	}
}

func findUnit(t *testing.T, s *slice.Slice, name string) slice.Unit {
	t.Helper()
	for _, u := range s.Units {
		if u.Name == name {
			return u
		}
	}
	t.Fatalf("no unit %s in slice %s", name, s.Cluster)
	return slice.Unit{}
}

func appendFile(t *testing.T, name, text string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
