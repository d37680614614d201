package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// istioCRDs is Istio's VirtualService and DestinationRule CRDs, generated
// from the pinned istio.io/api module (see its README).
func istioCRDs(t *testing.T) string {
	t.Helper()
	return filepath.Join(agentproc.ModuleRoot(), "test", "fixtures", "istio-crds", "crds.yaml")
}

// fleetExtRepo is a fleet repo rendered by the hub's code and applied unit
// by unit, in slice order, as an agent does (without Git).
type fleetExtRepo struct {
	t       *testing.T
	root    string
	cluster string
	applier *apply.Applier
	// rendered holds each unit's objects of the last apply.
	rendered map[string][]*unstructured.Unstructured
}

// newFleetExtRepo writes files into a new repo and returns it with an
// applier for c; the inventories go to a namespace of their own.
func newFleetExtRepo(t *testing.T, c *testenv.Cluster, cluster, inventoryNS string, files map[string]string) *fleetExtRepo {
	t.Helper()
	root := t.TempDir()
	treefile.Write(t, root, files)
	if err := c.CreateNamespace(testCtx(t), inventoryNS); err != nil {
		t.Fatal(err)
	}
	a, err := apply.New(c.RESTConfig(), apply.Options{InventoryNamespace: inventoryNS, Cluster: cluster, PollInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &fleetExtRepo{t: t, root: root, cluster: cluster, applier: a, rendered: map[string][]*unstructured.Unstructured{}}
}

// write replaces one input file.
func (r *fleetExtRepo) Write(rel, content string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.root, filepath.FromSlash(rel)), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// renderAndApply compiles the repo (flotilla render), then renders and
// applies every unit of the cluster's slice in order, each waited for;
// it returns the slice and each unit's apply result.
func (r *fleetExtRepo) renderAndApply() (*slice.Slice, map[string]*apply.UnitResult) {
	t := r.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	repo, err := fleet.Load(ctx, r.root)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	out, err := fleetrender.Compile(ctx, repo, fleetrender.Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if _, err := fleetrender.Write(ctx, r.root, out, fleetrender.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	var s *slice.Slice
	for _, co := range out.Clusters {
		if co.Slice.Cluster == r.cluster {
			s = co.Slice
		}
	}
	if s == nil {
		t.Fatalf("no slice for %s", r.cluster)
	}
	results := map[string]*apply.UnitResult{}
	for _, u := range s.Units {
		res, err := render.Unit(ctx, r.root, u, render.Options{HelmInProcess: true})
		if err != nil {
			t.Fatalf("render unit %s: %v", u.Name, err)
		}
		r.rendered[u.Name] = res.Objects
		ur, err := r.applier.Apply(ctx, apply.UnitRequest{
			Name: u.Name, Hash: u.Hash, Objects: res.Objects,
			Prune: u.Prune, Wait: u.Wait, Timeout: time.Minute,
		})
		if err != nil {
			t.Fatalf("apply unit %s: %v", u.Name, err)
		}
		if !ur.Ready {
			t.Fatalf("unit %s not ready: %v", u.Name, ur.NotReady)
		}
		results[u.Name] = ur
	}
	return s, results
}
