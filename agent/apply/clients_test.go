package apply_test

import (
	"errors"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-gitops/flotilla/agent/apply"
)

// Appliers and discovery built on one Clients go through its one transport
// (the counter wrapped into the config sees all of them).
func TestClientsAreSharedByAppliersAndDiscovery(t *testing.T) {
	c := minimalCluster(t)
	ns := "inv-clients"
	if err := c.CreateNamespace(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	cfg := c.RESTConfig()
	counter := &apply.WriteCounter{}
	counter.Wrap(cfg)
	clients, err := apply.NewClients(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := apply.NewWithClients(clients, apply.Options{InventoryNamespace: ns, Cluster: "test"})
	if err != nil {
		t.Fatal(err)
	}
	objs := parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: "+ns+"\ndata:\n  k: v\n")
	if _, err := first.Apply(ctx(t), apply.UnitRequest{Name: "shared", Hash: "h1", Objects: objs, Prune: true}); err != nil {
		t.Fatal(err)
	}
	if counter.Writes() == 0 {
		t.Error("the Applier's writes did not go through the shared transport")
	}

	second, err := apply.NewWithClients(clients, apply.Options{InventoryNamespace: ns, Cluster: "test"})
	if err != nil {
		t.Fatal(err)
	}
	units, err := second.Units(ctx(t))
	if err != nil || !slices.Contains(units, "shared") {
		t.Errorf("second Applier's Units() = %v, %v", units, err)
	}

	counter.Reset()
	list, err := clients.Discovery.ServerResourcesForGroupVersionWithContext(ctx(t), "v1")
	if err != nil || len(list.APIResources) == 0 {
		t.Fatalf("discovery of v1: %v", err)
	}
	if counter.Reads() == 0 {
		t.Error("discovery did not go through the shared transport")
	}
	if _, err := clients.Mapper.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1"); err != nil {
		t.Errorf("mapper: %v", err)
	}
}

func TestNewWithClientsNeedsClients(t *testing.T) {
	if _, err := apply.NewWithClients(nil, apply.Options{InventoryNamespace: "x"}); !errors.Is(err, apply.ErrInvalid) {
		t.Errorf("NewWithClients(nil) = %v, want ErrInvalid", err)
	}
	if _, err := apply.NewWithClients(&apply.Clients{}, apply.Options{InventoryNamespace: "x"}); !errors.Is(err, apply.ErrInvalid) {
		t.Errorf("NewWithClients(empty) = %v, want ErrInvalid", err)
	}
}
