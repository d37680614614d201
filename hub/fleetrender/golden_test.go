package fleetrender_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/golden"
)

// templateDir is the committed fleet-repo template.
const templateDir = "../../fleet-repo-template"

// readArchive parses a txtar-style fixture: a comment, then files each
// introduced by a "-- path --" line.
func readArchive(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			files[name] = body.String()
		}
		body.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			name = strings.TrimSuffix(strings.TrimPrefix(trimmed, "-- "), " --")
			continue
		}
		if name != "" {
			body.WriteString(line)
		}
	}
	flush()
	return files
}

// writeArchive materialises a fixture into a new temporary directory.
func writeArchive(t *testing.T, file string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range readArchive(t, file) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// copyTree copies a directory tree (regular files and directories).
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// offlineCharts vendors as the CLI does; in these tests every chart is
// already vendored and locked, so it never downloads.
var offlineCharts fleetrender.ChartVendor = chartvendor.VendorCharts

func compileRepo(t *testing.T, root string, opts fleetrender.Options) *fleetrender.Output {
	t.Helper()
	ctx := context.Background()
	repo, err := fleet.Load(ctx, root)
	if err != nil {
		t.Fatalf("load %s:\n%v", root, err)
	}
	if opts.Charts == nil {
		opts.Charts = offlineCharts
	}
	out, err := fleetrender.Compile(ctx, repo, opts)
	if err != nil {
		t.Fatalf("compile %s:\n%v", root, err)
	}
	return out
}

// renderRepo compiles root and writes its rendered/ tree.
func renderRepo(t *testing.T, root string, opts fleetrender.Options) *fleetrender.Output {
	t.Helper()
	out := compileRepo(t, root, opts)
	if _, err := fleetrender.Write(context.Background(), root, out, fleetrender.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return out
}

// describe renders the generated files and, per unit, the objects an agent
// would apply (pkg/render), as one reviewable text.
func describe(t *testing.T, root string, out *fleetrender.Output) string {
	t.Helper()
	var b strings.Builder
	for _, co := range out.Clusters {
		for _, f := range co.Files {
			fmt.Fprintf(&b, "==> %s\n%s", f.Path, f.Data)
		}
		for _, u := range co.Slice.Units {
			res, err := render.Unit(context.Background(), root, u, render.Options{HelmInProcess: true})
			if err != nil {
				t.Fatalf("render unit %s of %s: %v", u.Name, co.Slice.Cluster, err)
			}
			y, err := res.YAML()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "==> objects of %s\n%s", u.Path, y)
		}
	}
	return b.String()
}

// TestGoldenFixtures compiles each focused fixture and renders its units.
func TestGoldenFixtures(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join("testdata", "fixtures", "*.txtar"))
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range fixtures {
		name := strings.TrimSuffix(filepath.Base(f), ".txtar")
		t.Run(name, func(t *testing.T) {
			root := writeArchive(t, f)
			out := renderRepo(t, root, fleetrender.Options{})
			golden.Assert(t, filepath.Join("testdata", "golden", name+".golden"), describe(t, root, out))
		})
	}
}

// TestGoldenTemplate compiles the committed fleet-repo template: the
// generated tree must equal the committed rendered/, and the files and
// rendered objects the golden file.
func TestGoldenTemplate(t *testing.T) {
	root := copyTree(t, templateDir)
	out := compileRepo(t, root, fleetrender.Options{})
	ch, err := fleetrender.Write(context.Background(), root, out, fleetrender.WriteOptions{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Empty() {
		t.Errorf("the committed fleet-repo-template/rendered is stale (run bin/flotilla render --repo fleet-repo-template): %v", ch.All())
	}
	golden.Assert(t, filepath.Join("testdata", "golden", "template.golden"), describe(t, root, out))
}

// unitObjects renders one unit of a cluster and returns its objects' YAML.
func unitObjects(t *testing.T, root string, out *fleetrender.Output, cluster, unit string) string {
	t.Helper()
	for _, co := range out.Clusters {
		if co.Slice.Cluster != cluster {
			continue
		}
		for _, u := range co.Slice.Units {
			if u.Name == unit {
				res, err := render.Unit(context.Background(), root, u, render.Options{HelmInProcess: true})
				if err != nil {
					t.Fatal(err)
				}
				y, err := res.YAML()
				if err != nil {
					t.Fatal(err)
				}
				return string(y)
			}
		}
	}
	t.Fatalf("cluster %s has no unit %s", cluster, unit)
	return ""
}

// TestTemplateScenarios asserts the seed scenarios on the objects agents
// would apply, independently of the golden file.
func TestTemplateScenarios(t *testing.T) {
	root := copyTree(t, templateDir)
	out := compileRepo(t, root, fleetrender.Options{})
	contains := func(cluster, unit string, want ...string) {
		t.Helper()
		got := unitObjects(t, root, out, cluster, unit)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s/%s: objects lack %q:\n%s", cluster, unit, w, got)
			}
		}
	}
	// nginx: 4 replicas divided 3:1.
	contains("member1", "nginx", "replicas: 3")
	contains("member2", "nginx", "replicas: 1")
	// iot-collector: 3 on cloud clusters, 1 with a 512Mi limit on the edge.
	contains("member1", "iot-collector", "replicas: 3")
	contains("member2", "iot-collector", "replicas: 3")
	contains("edge-1", "iot-collector", "replicas: 1", "memory: 512Mi", "value: edge-1.eu-west-1")
	// backend: dev overlay on member2, production overlay on member1.
	contains("member2", "backend", "replicas: 1", "value: debug")
	contains("member1", "backend", "replicas: 10", "value: info")
	// microservices: Helm from the vendored chart repo and from a path.
	contains("member1", "mysql-db", "kind: StatefulSet", "image: mysql:8.4", "value: shop")
	contains("member2", "mysql-db", "value: shop_staging")
	contains("member1", "backend-api", "replicas: 2", "value: eu-west-1")
	contains("member2", "backend-api", "replicas: 1", "value: us-east-1")
	contains("member1", "frontend-web", "image: nginx:1.27-alpine")

	slices := map[string]*slice.Slice{}
	for _, co := range out.Clusters {
		slices[co.Slice.Cluster] = co.Slice
	}
	if got := unitNames(slices["edge-1"]); got != "flotilla-namespaces flotilla-policies iot-collector" {
		t.Errorf("edge-1 units = %s", got)
	}
	// backend-api after mysql-db and redis-cache, frontend-web after it.
	order := unitNames(slices["member1"])
	for _, pair := range [][2]string{{"mysql-db", "backend-api"}, {"redis-cache", "backend-api"}, {"backend-api", "frontend-web"}, {"flotilla-namespaces", "nginx"}} {
		if strings.Index(order, pair[0]) > strings.Index(order, pair[1]) {
			t.Errorf("member1 order %q: %s must come before %s", order, pair[0], pair[1])
		}
	}
}

func unitNames(s *slice.Slice) string {
	if s == nil {
		return ""
	}
	var names []string
	for _, u := range s.Units {
		names = append(names, u.Name)
	}
	return strings.Join(names, " ")
}

// TestReplicaDivisionSeed is the seed example, on the fixture.
func TestReplicaDivisionSeed(t *testing.T) {
	root := writeArchive(t, filepath.Join("testdata", "fixtures", "replica-division.txtar"))
	out := renderRepo(t, root, fleetrender.Options{})
	want := map[string]string{"member1": "replicas: 3", "member2": "replicas: 1"}
	for cluster, w := range want {
		if got := unitObjects(t, root, out, cluster, "nginx"); !strings.Contains(got, w) {
			t.Errorf("%s: want %s in\n%s", cluster, w, got)
		}
	}
	total := 0
	for _, c := range []string{"a", "b", "c", "d"} {
		got := unitObjects(t, root, out, c, "worker")
		var n int
		for _, line := range strings.Split(got, "\n") {
			if _, err := fmt.Sscanf(strings.TrimSpace(line), "replicas: %d", &n); err == nil {
				break
			}
		}
		total += n
	}
	if total != 7 {
		t.Errorf("worker replicas sum to %d, want 7", total)
	}
}
