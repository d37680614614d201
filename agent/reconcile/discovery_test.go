package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/reconcile"
)

// Discovery on shared clients reports APIs added since its last call: the
// cache it shares with others is not a reason to miss a unit's new CRDs.
func TestKubeDiscoverySeesNewAPIs(t *testing.T) {
	c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients, err := apply.NewClients(c.RESTConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := reconcile.NewKubeDiscoveryWithClient(clients.Discovery)
	const res = "discovery.test/v1/Widget"
	info, err := d.Discover(ctx)
	if err != nil || info.KubeVersion == "" || slices.Contains(info.Resources, res) {
		t.Fatalf("first Discover() = %+v, %v", info, err)
	}
	crd := "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.discovery.test\n" +
		"spec:\n  group: discovery.test\n  scope: Namespaced\n  names: {kind: Widget, plural: widgets, singular: widget}\n" +
		"  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n"
	file := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(file, []byte(crd), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyCRDFiles(ctx, file); err != nil {
		t.Fatal(err)
	}
	for {
		info, err = d.Discover(ctx)
		if err == nil && slices.Contains(info.Resources, res) && slices.Contains(info.GroupVersions, "discovery.test/v1") {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("Discover() after the CRD = %v, %v", info.GroupVersions, err)
		}
		// Discovery may lag the CRD being Established by a moment.
		time.Sleep(200 * time.Millisecond)
	}
}
