package bootstrap

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// newFleet is a fresh copy of the template fleet repo.
func newFleet(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	if _, err := Init(context.Background(), dir, InitOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func loadCluster(t *testing.T, dir, name string) *fleet.Cluster {
	t.Helper()
	repo, err := fleet.Load(context.Background(), dir)
	if err != nil {
		t.Fatalf("fleet.Load after register: %v", err)
	}
	c := repo.Cluster(name)
	if c == nil {
		t.Fatalf("cluster %s not in the repo", name)
	}
	return c
}

func TestRegisterNewCluster(t *testing.T) {
	dir := newFleet(t)
	labels := map[string]string{"env": "production", "type": "edge", "region": "eu-west-1", "flag": "true"}
	res, err := Register(context.Background(), dir, Cluster{Name: "edge-7", Labels: labels}, RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.File != "clusters/edge-7.yaml" || !res.Created || len(res.Problems) > 0 {
		t.Errorf("result %+v", res)
	}
	c := loadCluster(t, dir, "edge-7")
	if !maps.Equal(c.Metadata.Labels, labels) {
		t.Errorf("labels %v, want %v", c.Metadata.Labels, labels)
	}
	// The fleets select it by its labels: it joins production and edge.
	repo, _ := fleet.Load(context.Background(), dir)
	var fleets []string
	for _, f := range repo.FleetsOf(repo.Cluster("edge-7")) {
		fleets = append(fleets, f.Metadata.Name)
	}
	if strings.Join(fleets, ",") != "edge,production" {
		t.Errorf("edge-7 is in fleets %v, want edge and production", fleets)
	}
	data, _ := os.ReadFile(filepath.Join(dir, res.File))
	if !strings.HasPrefix(string(data), "# Registered by `flotilla bootstrap`") || !strings.Contains(string(data), "flag: \"true\"") {
		t.Errorf("file:\n%s", data)
	}
}

func TestRegisterExisting(t *testing.T) {
	ctx := context.Background()
	dir := newFleet(t)
	// A cluster kept in a subdirectory, with a comment and a spec.
	sub := filepath.Join(dir, "clusters", "edge")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	orig := `# Shop floor, Lyon.
apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: lyon-1
  labels:
    env: production # audited
    type: edge
spec:
  kubernetesVersion: v1.36.3
`
	path := filepath.Join(sub, "lyon-1.yaml")
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}

	_, err := Register(ctx, dir, Cluster{Name: "lyon-1", Labels: map[string]string{"tier": "gold"}}, RegisterOptions{})
	if !errors.Is(err, ErrClusterExists) || !strings.Contains(err.Error(), "clusters/edge/lyon-1.yaml") {
		t.Fatalf("register an existing cluster: %v, want ErrClusterExists naming its file", err)
	}
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Fatal("a refused register changed the file")
	}
	if _, err := os.Stat(filepath.Join(dir, "clusters", "lyon-1.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused register wrote clusters/lyon-1.yaml")
	}

	res, err := Register(ctx, dir, Cluster{Name: "lyon-1", Labels: map[string]string{"tier": "gold", "type": "edge-lite"}}, RegisterOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.File != "clusters/edge/lyon-1.yaml" || res.Created {
		t.Errorf("result %+v", res)
	}
	c := loadCluster(t, dir, "lyon-1")
	want := map[string]string{"env": "production", "type": "edge-lite", "tier": "gold"}
	if !maps.Equal(c.Metadata.Labels, want) || c.Spec.KubernetesVersion != "v1.36.3" {
		t.Errorf("after --force: labels %v spec %+v", c.Metadata.Labels, c.Spec)
	}
	b, _ := os.ReadFile(path)
	for _, keep := range []string{"# Shop floor, Lyon.", "# audited"} {
		if !strings.Contains(string(b), keep) {
			t.Errorf("--force lost %q:\n%s", keep, b)
		}
	}
}

func TestRegisterRefusesInvalidInput(t *testing.T) {
	ctx := context.Background()
	dir := newFleet(t)

	for _, name := range []string{"", "../evil", "Member1", "a_b", strings.Repeat("x", 64)} {
		if _, err := Register(ctx, dir, Cluster{Name: name}, RegisterOptions{}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("name %q: %v, want ErrInvalidOption", name, err)
		}
	}
	// A label hub/fleet refuses: the new file is removed again, and the
	// error is the fleet error naming it.
	_, err := Register(ctx, dir, Cluster{Name: "member9", Labels: map[string]string{"env": "not valid!"}}, RegisterOptions{})
	var list fleet.ErrorList
	if !errors.As(err, &list) || !errors.Is(err, fleet.ErrInvalidValue) || list[0].File != "clusters/member9.yaml" {
		t.Fatalf("invalid label: %v, want a fleet.ErrorList with ErrInvalidValue in clusters/member9.yaml", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "clusters", "member9.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the refused cluster file was left behind")
	}
	// Same for an update: the old content comes back.
	orig, _ := os.ReadFile(filepath.Join(dir, "clusters", "member1.yaml"))
	if _, err := Register(ctx, dir, Cluster{Name: "member1", Labels: map[string]string{"bad key!": "x"}}, RegisterOptions{Force: true}); err == nil {
		t.Fatal("an invalid label key was accepted")
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "clusters", "member1.yaml")); string(now) != string(orig) {
		t.Errorf("the refused update was not rolled back:\n%s", now)
	}
	if _, err := fleet.Load(ctx, dir); err != nil {
		t.Errorf("the repo no longer loads: %v", err)
	}
}

// TestRegisterReportsOtherProblems: an error elsewhere in the repo does not
// stop the registration, which reports it.
func TestRegisterReportsOtherProblems(t *testing.T) {
	dir := newFleet(t)
	broken := filepath.Join(dir, "fleets", "broken.yaml")
	if err := os.WriteFile(broken, []byte("apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: broken\nspec:\n  colour: blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Register(context.Background(), dir, Cluster{Name: "member9", Labels: map[string]string{"env": "dev"}}, RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) == 0 || res.Problems[0].File != "fleets/broken.yaml" || !errors.Is(res.Problems, fleet.ErrUnknownField) {
		t.Errorf("problems %v, want the unknown field in fleets/broken.yaml", res.Problems)
	}
}
