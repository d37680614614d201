package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// writeLargeRepo writes clusters clusters (in 100 subdirectories), four
// fleets and apps applications mixing the three source kinds.
func writeLargeRepo(tb testing.TB, clusters, apps int) string {
	tb.Helper()
	root := tb.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	regions := []string{"eu-west", "us-east", "ap-south"}
	for i := 0; i < clusters; i++ {
		name := fmt.Sprintf("c%05d", i)
		typ := "cloud"
		if i%4 == 0 {
			typ = "edge"
		}
		write(fmt.Sprintf("clusters/g%02d/%s.yaml", i%100, name), fmt.Sprintf(`apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: %s
  labels:
    env: %s
    region: %s
    type: %s
spec:
  capacity: {cpu: "32", memory: 128Gi}
`, name, []string{"dev", "staging", "production"}[i%3], regions[i%3], typ))
	}
	for _, env := range []string{"dev", "staging", "production"} {
		write("fleets/"+env+".yaml", fmt.Sprintf("apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: %s\nspec:\n  selector:\n    matchLabels: {env: %s}\n  namespaces:\n    - name: shop\n", env, env))
	}
	write("fleets/edge.yaml", "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: edge\nspec:\n  selector:\n    matchLabels: {type: edge}\n  namespaces:\n    - name: shop\n")
	write("apps/shared/base/kustomization.yaml", "resources: []\n")
	write("apps/shared/chart/Chart.yaml", "apiVersion: v2\nname: shared\nversion: 0.1.0\n")
	for i := 0; i < apps; i++ {
		name := fmt.Sprintf("app%02d", i)
		var source string
		switch i % 3 {
		case 0:
			source = "    kustomize: {path: ../shared/base}\n"
		case 1:
			source = "    helm:\n      path: ../shared/chart\n      values: {replicas: 2}\n"
		default:
			source = "    manifests: {path: ../shared/base}\n"
		}
		write("apps/"+name+"/app.yaml", fmt.Sprintf(`apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: %s
spec:
  source:
%s  syncPolicies:
    - destination: {fleet: production}
      overrides:
        namespace: shop
        values: {region: "${cluster.labels.region}"}
    - destination:
        selector:
          matchLabels: {type: edge}
      overrides:
        replicas: [{name: %s, count: 1}]
`, name, source, name))
	}
	return root
}

func BenchmarkLoad(b *testing.B) {
	for _, size := range []struct{ clusters, apps int }{{1000, 20}, {10000, 20}} {
		b.Run(fmt.Sprintf("clusters=%d,apps=%d", size.clusters, size.apps), func(b *testing.B) {
			root := writeLargeRepo(b, size.clusters, size.apps)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := Load(context.Background(), root)
				if err != nil {
					b.Fatal(err)
				}
				if len(r.Clusters) != size.clusters {
					b.Fatalf("%d clusters", len(r.Clusters))
				}
			}
		})
	}
}
