package volcano_test

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/flotilla-gitops/flotilla/pkg/apply"
	"github.com/flotilla-gitops/flotilla/pkg/volcano"
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
