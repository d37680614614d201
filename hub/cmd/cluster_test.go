package cmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// TestSetDecommission: the marker is added as one line, comments and
// other fields stay, a second run changes nothing, and the result decodes
// strictly as a Cluster with Decommission set.
func TestSetDecommission(t *testing.T) {
	cases := map[string]string{
		"with spec": `# an edge site
apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: edge-7
  labels:
    type: edge # by convention
spec:
  kubernetesVersion: v1.36.3
`,
		"no spec":    "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge-7\n",
		"empty spec": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge-7\nspec: {}\n",
		"false":      "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge-7\nspec:\n  decommission: false\n",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			repo := t.TempDir()
			p := filepath.Join(repo, "clusters", "edge-7.yaml")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(in), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := runDecommission(&out, repo, "edge-7"); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(p)
			if !strings.Contains(string(got), "  decommission: true\n") {
				t.Fatalf("no marker:\n%s", got)
			}
			for _, line := range strings.Split(strings.TrimSpace(in), "\n") {
				if !strings.Contains(line, "decommission") && !strings.Contains(line, "spec: {}") && !strings.Contains(string(got), line) {
					t.Errorf("lost line %q:\n%s", line, got)
				}
			}
			out.Reset()
			if err := runDecommission(&out, repo, "edge-7"); err != nil || !strings.Contains(out.String(), "already") {
				t.Fatalf("second run: %v %s", err, out.String())
			}
			again, _ := os.ReadFile(p)
			if !bytes.Equal(got, again) {
				t.Errorf("second run changed the file")
			}
			r, err := fleet.Load(context.Background(), repo)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if len(r.Clusters) != 1 || !r.Clusters[0].Spec.Decommission {
				t.Fatalf("clusters %+v", r.Clusters)
			}
		})
	}
}

func TestDecommissionErrors(t *testing.T) {
	repo := t.TempDir()
	if err := runDecommission(&bytes.Buffer{}, repo, "missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing cluster: %v", err)
	}
	if err := runDecommission(&bytes.Buffer{}, repo, "../x"); err == nil {
		t.Errorf("bad name accepted")
	}
	if _, _, err := setDecommission([]byte("apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\n")); !errors.Is(err, ErrNotCluster) {
		t.Errorf("a Fleet: %v", err)
	}
	if _, _, err := setDecommission([]byte("kind: Cluster\nspec: [1]\n")); !errors.Is(err, ErrNotCluster) {
		t.Errorf("spec a list: %v", err)
	}
}
