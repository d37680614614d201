package traffic_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/traffic"
	"github.com/flotilla-gitops/flotilla/test/golden"
)

// loadRoute loads hub/fleet's good test repo with routes/web.yaml
// replaced by route (when not empty).
func loadRoute(t *testing.T, route string) *fleet.TrafficRoute {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join("..", "fleet", "testdata", "good")
	err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == filepath.Join("routes", "web.yaml") && route != "" {
			data = []byte(route)
		}
		dst := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	repo, err := fleet.Load(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	return repo.TrafficRoutes[0]
}

func marshal(t *testing.T, r *fleet.TrafficRoute) string {
	t.Helper()
	var b strings.Builder
	for i, obj := range traffic.Objects(r) {
		y, err := yaml.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.String()
}

// TestGoldenRoute renders hub/fleet's example route: matches on a header
// and on a URI with a query parameter, a port, header changes both ways,
// gateways and extra hosts, and a 90/10 split.
func TestGoldenRoute(t *testing.T) {
	got := marshal(t, loadRoute(t, ""))
	golden.Assert(t, filepath.Join("testdata", "web.golden"), got)
}

// TestCanaryStepIsMinimal: moving the canary from 10% to 25% changes the
// two weight lines and nothing else.
func TestCanaryStepIsMinimal(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "fleet", "testdata", "good", "routes", "web.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	step := strings.NewReplacer("weight: 90", "weight: 75", "weight: 10", "weight: 25").Replace(string(src))
	before := strings.Split(marshal(t, loadRoute(t, "")), "\n")
	after := strings.Split(marshal(t, loadRoute(t, step)), "\n")
	if len(before) != len(after) {
		t.Fatalf("line count changed: %d → %d", len(before), len(after))
	}
	var changed []string
	for i := range before {
		if before[i] != after[i] {
			changed = append(changed, before[i]+" → "+after[i])
		}
	}
	want := []string{"      weight: 90 →       weight: 75", "      weight: 10 →       weight: 25"}
	if strings.Join(changed, "\n") != strings.Join(want, "\n") {
		t.Errorf("changed lines:\n%s\nwant:\n%s", strings.Join(changed, "\n"), strings.Join(want, "\n"))
	}
}

// TestDefaults: hosts default to the Service; a single destination has no
// weight; no gateways means the mesh.
func TestDefaults(t *testing.T) {
	r := &fleet.TrafficRoute{
		Metadata: fleet.ObjectMeta{Name: "api"},
		Spec: fleet.TrafficRouteSpec{
			Namespace: "shop", Host: "api",
			Subsets: []fleet.RouteSubset{{Name: "v1", Labels: map[string]string{"version": "v1"}}},
			HTTP:    []fleet.HTTPRoute{{Route: []fleet.RouteDestination{{Subset: "v1"}}}},
		},
	}
	objs := traffic.Objects(r)
	if len(objs) != 2 || objs[0].GetKind() != traffic.KindVirtualService || objs[1].GetKind() != traffic.KindDestinationRule {
		t.Fatalf("objects: %v", objs)
	}
	vs := objs[0]
	if vs.GetAPIVersion() != "networking.istio.io/v1" || vs.GetNamespace() != "shop" || vs.GetName() != "api" {
		t.Errorf("metadata: %s %s/%s", vs.GetAPIVersion(), vs.GetNamespace(), vs.GetName())
	}
	y, _ := yaml.Marshal(vs.Object)
	for _, want := range []string{"hosts:\n  - api\n", "- destination:\n        host: api\n        subset: v1\n"} {
		if !strings.Contains(string(y), want) {
			t.Errorf("VirtualService lacks %q:\n%s", want, y)
		}
	}
	for _, unwanted := range []string{"weight", "gateways", "match"} {
		if strings.Contains(string(y), unwanted) {
			t.Errorf("VirtualService has %s:\n%s", unwanted, y)
		}
	}
}
