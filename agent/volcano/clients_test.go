package volcano_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/volcano"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// A Manager on shared clients needs a client that knows Volcano's types;
// building either contacts no server.
func TestNewManagerWithClientsNeedsVolcanoScheme(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	applier, err := apply.New(cfg, apply.Options{InventoryNamespace: "flotilla-system"})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := apply.NewClients(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := volcano.NewManagerWithClients(plain, volcano.Options{Applier: applier}); err == nil || !strings.Contains(err.Error(), "volcano.Scheme()") {
		t.Errorf("NewManagerWithClients(client-go scheme) = %v, want a scheme error", err)
	}
	shared, err := apply.NewClients(cfg, volcano.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := volcano.NewManagerWithClients(shared, volcano.Options{Applier: applier}); err != nil {
		t.Errorf("NewManagerWithClients(volcano scheme) = %v", err)
	}
	if _, err := volcano.NewManagerWithClients(nil, volcano.Options{Applier: applier}); err == nil {
		t.Error("NewManagerWithClients(nil) succeeded")
	}
}

// Installed on shared clients sees Volcano once its APIs appear: the
// discovery cache it shares does not keep the old answer.
func TestInstalledOnSharedClientsSeesVolcanoAppear(t *testing.T) {
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	clients, err := apply.NewClients(c.RESTConfig(), volcano.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	applier, err := apply.NewWithClients(clients, apply.Options{InventoryNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	m, err := volcano.NewManagerWithClients(clients, volcano.Options{Applier: applier, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	// Fill the shared cache before Volcano exists.
	if _, err := clients.Discovery.ServerGroupsWithContext(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := m.Installed(ctx(t)); !errors.Is(err, volcano.ErrNotInstalled) {
		t.Fatalf("Installed() without CRDs = %v, want ErrNotInstalled", err)
	}

	// Just the served kinds Installed looks for, not Volcano's schemas.
	var crds strings.Builder
	for _, r := range []struct{ group, version, kind, plural string }{
		{"batch.volcano.sh", "v1alpha1", "Job", "jobs"},
		{"scheduling.volcano.sh", "v1beta1", "Queue", "queues"},
	} {
		crds.WriteString("---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: " + r.plural + "." + r.group +
			"\nspec:\n  group: " + r.group + "\n  scope: Namespaced\n  names: {kind: " + r.kind + ", plural: " + r.plural + ", singular: " + strings.ToLower(r.kind) +
			"}\n  versions:\n    - name: " + r.version + "\n      served: true\n      storage: true\n      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n")
	}
	file := filepath.Join(t.TempDir(), "crds.yaml")
	if err := os.WriteFile(file, []byte(crds.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyCRDFiles(ctx(t), file); err != nil {
		t.Fatal(err)
	}
	if err := m.Installed(ctx(t)); !errors.Is(err, volcano.ErrNotInstalled) {
		t.Errorf("Installed() within its own cache time = %v, want the cached ErrNotInstalled", err)
	}
	now = now.Add(time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := m.Installed(ctx(t))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Installed() after the CRDs = %v, want nil", err)
		}
		// Discovery may lag the CRDs being Established by a moment.
		now = now.Add(time.Minute)
		time.Sleep(200 * time.Millisecond)
	}
}
