package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Spec sizes a synthetic fleet repo.
type Spec struct {
	Clusters int
	Apps     int
	// CustomSchema: the plain-manifests application the plan benchmark
	// changes (app-04) gets a kustomization that sets a custom OpenAPI
	// schema (kustomize's `openapi:`), whose units render alone.
	CustomSchema bool
}

var (
	envs    = []string{"production", "staging", "dev"}
	regions = []string{"eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-south-1"}
)

// ClusterName is the name of the i-th generated cluster.
func ClusterName(i int) string { return fmt.Sprintf("cluster-%05d", i) }

// AppName is the name of the i-th generated application.
func AppName(i int) string { return fmt.Sprintf("app-%02d", i) }

// clusterLabels are the labels of the i-th cluster: env cycles over
// production/staging/dev, region over five regions, every fifth is an edge
// cluster.
func clusterLabels(i int) (env, region, typ string) {
	env = envs[i%len(envs)]
	region = regions[(i/3)%len(regions)]
	typ = "cloud"
	if i%5 == 4 {
		typ = "edge"
	}
	return env, region, typ
}

// Generate writes a fleet repo of s.Clusters clusters and s.Apps
// applications into dir: one fleet per env plus an edge fleet, all with
// namespaces; applications cycle through kustomize (with a shared base
// outside the app directory), plain manifests and Helm (a chart kept in the
// repo), and through destinations by fleet, selector and cluster names, with
// overrides that are shared (replicas, patches, values) or per cluster
// (${cluster.labels.region}), and one weighted replica division over a
// whole fleet.
func Generate(dir string, s Spec) error {
	w := &writer{root: dir, customSchema: s.CustomSchema}
	for i := 0; i < s.Clusters; i++ {
		env, region, typ := clusterLabels(i)
		w.file(filepath.Join("clusters", ClusterName(i)+".yaml"), fmt.Sprintf(`apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: %s
  labels:
    env: %s
    region: %s
    type: %s
spec:
  kubernetesVersion: v1.36.3
`, ClusterName(i), env, region, typ))
	}
	for _, env := range envs {
		w.file(filepath.Join("fleets", env+".yaml"), fmt.Sprintf(`apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: %s
spec:
  selector:
    matchLabels:
      env: %s
  namespaces:
    - name: apps
      labels:
        owner: platform
    - name: %s-tools
  healthCheck:
    interval: 30s
    failureThreshold: 3
`, env, env, env))
	}
	w.file("fleets/edge.yaml", `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: edge
spec:
  selector:
    matchLabels:
      type: edge
  namespaces:
    - name: apps
      labels:
        owner: platform
    - name: edge-agent
`)
	// A kustomize base shared by the kustomize applications, outside their
	// directories: its hash must reach every unit that uses it.
	w.file("bases/web/kustomization.yaml", "resources:\n  - deployment.yaml\n")
	w.file("bases/web/deployment.yaml", deployment("web", "nginx:1.27"))
	for i := 0; i < s.Apps; i++ {
		w.app(i, s.Clusters)
	}
	return w.err
}

// customSchemaJSON gives a custom kind a merge key, in the shape of
// kustomize's "custom OpenAPI schema" example.
const customSchemaJSON = `{"definitions": {"v1alpha1.MyResource": {
  "type": "object",
  "x-kubernetes-group-version-kind": [{"group": "example.com", "kind": "MyResource", "version": "v1alpha1"}],
  "properties": {"spec": {"type": "object", "properties": {"containers": {
    "type": "array", "items": {"type": "object"},
    "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"}}}}}}}
`

type writer struct {
	root string
	err  error
	// customSchema: Spec.CustomSchema.
	customSchema bool
}

// customSchemaApp is the application Spec.CustomSchema changes: the
// plain-manifests one the plan benchmark edits.
const customSchemaApp = 4

func (w *writer) file(rel, content string) {
	if w.err != nil {
		return
	}
	p := filepath.Join(w.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.err = err
		return
	}
	w.err = os.WriteFile(p, []byte(content), 0o644)
}

func deployment(name, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels:
    app.kubernetes.io/name: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: %[1]s
  template:
    metadata:
      labels:
        app.kubernetes.io/name: %[1]s
    spec:
      containers:
        - name: main
          image: %[2]s
          resources:
            requests:
              cpu: 5m
              memory: 8Mi
`, name, image)
}

// destination returns the i-th application's syncPolicies: they cycle over
// fleet, selector and explicit cluster destinations, some with per-cluster
// substitutions and one with a weighted division.
func destination(i, clusters int, helm bool) string {
	var b strings.Builder
	b.WriteString("  syncPolicies:\n")
	switch i % 4 {
	case 0:
		b.WriteString("    - destination:\n        fleet: production\n")
		b.WriteString("      overrides:\n        replicas:\n          - name: " + AppName(i) + "\n            count: 3\n")
		b.WriteString("    - destination:\n        fleet: staging\n")
	case 1:
		b.WriteString("    - destination:\n        selector:\n          matchLabels:\n            type: cloud\n")
		if helm {
			b.WriteString("      overrides:\n        values:\n          region: ${cluster.labels.region}\n")
		} else {
			b.WriteString("      overrides:\n        images:\n          - name: nginx\n            newTag: 1.27-${cluster.labels.region}\n")
		}
	case 2:
		b.WriteString("    - destination:\n        fleet: dev\n")
		b.WriteString("    - destination:\n        fleet: edge\n")
		if !helm {
			b.WriteString("      overrides:\n        patches:\n          - patch: |\n              apiVersion: apps/v1\n              kind: Deployment\n              metadata:\n                name: " + AppName(i) + "\n              spec:\n                template:\n                  spec:\n                    containers:\n                      - name: main\n                        resources:\n                          limits:\n                            memory: 512Mi\n")
		}
	case 3:
		// Every cluster, explicitly named by a selector on env, plus a
		// weighted division over the production fleet.
		b.WriteString("    - destination:\n        selector:\n          matchExpressions:\n            - key: env\n              operator: In\n              values: [production, staging, dev]\n")
		b.WriteString("    - destination:\n        fleet: production\n")
		b.WriteString("      replicaScheduling:\n        replicaSchedulingType: Divided\n        replicaDivisionPreference: Weighted\n")
		b.WriteString("        target:\n          name: " + AppName(i) + "\n        replicas: " + fmt.Sprint(clusters) + "\n")
		b.WriteString("        weightPreference:\n          staticWeightList:\n")
		for c := 0; c < clusters; c++ {
			if env, _, _ := clusterLabels(c); env == "production" {
				fmt.Fprintf(&b, "            - targetCluster:\n                clusterNames: [%s]\n              weight: %d\n", ClusterName(c), 1+c%3)
			}
		}
	}
	return b.String()
}

func (w *writer) app(i, clusters int) {
	name := AppName(i)
	dir := filepath.Join("apps", name)
	header := fmt.Sprintf("apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: %s\nspec:\n", name)
	deps := ""
	if i%4 == 1 && i > 4 {
		// Same destinations as app i-4, so the dependency is deployed
		// wherever the dependent is.
		deps = "  dependsOn:\n    - " + AppName(i-4) + "\n"
	}
	switch i % 3 {
	case 0: // kustomize, with the shared base and a local overlay
		w.file(filepath.Join(dir, "overlay", "kustomization.yaml"), fmt.Sprintf(`resources:
  - ../../../bases/web
  - deployment.yaml
nameSuffix: "-%d"
`, i))
		w.file(filepath.Join(dir, "overlay", "deployment.yaml"), deployment(name, "nginx:1.27"))
		w.file(filepath.Join(dir, "app.yaml"), header+"  source:\n    kustomize:\n      path: overlay\n  namespace: apps\n"+deps+destination(i, clusters, false))
	case 1: // plain manifests
		w.file(filepath.Join(dir, "manifests", "deployment.yaml"), deployment(name, "nginx:1.27"))
		w.file(filepath.Join(dir, "manifests", "service.yaml"), fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\nspec:\n  ports:\n    - port: 80\n", name))
		source := "manifests"
		if w.customSchema && i == customSchemaApp {
			// The same files, through a kustomization that sets a custom
			// OpenAPI schema.
			source = "kustomize"
			w.file(filepath.Join(dir, "manifests", "kustomization.yaml"), "resources:\n  - deployment.yaml\n  - service.yaml\nopenapi:\n  path: schema.json\n")
			w.file(filepath.Join(dir, "manifests", "schema.json"), customSchemaJSON)
		}
		w.file(filepath.Join(dir, "app.yaml"), header+"  source:\n    "+source+":\n      path: manifests\n  namespace: apps\n"+deps+destination(i, clusters, false))
	case 2: // helm chart from a path
		w.file(filepath.Join(dir, "chart", "Chart.yaml"), fmt.Sprintf("apiVersion: v2\nname: %s\nversion: 1.0.0\n", name))
		w.file(filepath.Join(dir, "chart", "values.yaml"), "replicas: 1\nregion: none\nimage: nginx:1.27\n")
		w.file(filepath.Join(dir, "chart", "templates", "deployment.yaml"), strings.ReplaceAll(deployment(name, "{{ .Values.image }}"), "replicas: 1", "replicas: {{ .Values.replicas }}"))
		w.file(filepath.Join(dir, "app.yaml"), header+"  source:\n    helm:\n      path: chart\n      values:\n        replicas: 2\n        tier: backend\n  namespace: apps\n"+deps+destination(i, clusters, true))
	}
}
