package fleetrender

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
)

// These tests build repos by hand, bypassing fleet.Load's validation, to
// show the compiler itself reports each problem with file and field (the
// loader catches most of them first; dependsOn across clusters only the
// compiler can).

func cluster(name string, labels map[string]string) *fleet.Cluster {
	return &fleet.Cluster{Metadata: fleet.ObjectMeta{Name: name, Labels: labels},
		Source: fleet.Source{File: "clusters/" + name + ".yaml", Line: 1}}
}

func manifestsApp(t *testing.T, root, name string, policies ...fleet.SyncPolicy) *fleet.Application {
	t.Helper()
	dir := filepath.Join(root, "apps", name, "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &fleet.Application{
		Metadata: fleet.ObjectMeta{Name: name},
		Spec: fleet.ApplicationSpec{
			Source:       fleet.AppSource{Manifests: &fleet.PathSource{Path: "m"}},
			SyncPolicies: policies,
		},
		Source: fleet.Source{File: "apps/" + name + "/app.yaml", Line: 1},
	}
}

func toClusters(names ...string) fleet.SyncPolicy {
	return fleet.SyncPolicy{Destination: fleet.Destination{Clusters: names}}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(t *testing.T, root string) *fleet.Repo
		opts  Options
		class error
		// want are substrings of the single expected error: file, field, detail.
		want []string
	}{
		{
			name: "dependency not deployed to the same cluster",
			build: func(t *testing.T, root string) *fleet.Repo {
				db := manifestsApp(t, root, "db", toClusters("a"))
				api := manifestsApp(t, root, "api", toClusters("a", "b", "c"))
				api.Spec.DependsOn = []string{"db"}
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil), cluster("b", nil), cluster("c", nil)},
					Applications: []*fleet.Application{api, db}}
			},
			class: fleet.ErrDanglingReference,
			want:  []string{"apps/api/app.yaml:1: spec.dependsOn[0]", "api depends on db, which is not deployed to the same cluster", "clusters b, c"},
		},
		{
			name: "cluster lacks a label used in an override",
			build: func(t *testing.T, root string) *fleet.Repo {
				app := manifestsApp(t, root, "web", fleet.SyncPolicy{
					Destination: fleet.Destination{Clusters: []string{"a", "b"}},
					Overrides:   &fleet.Overrides{Images: []fleet.Image{{Name: "nginx", NewTag: "${cluster.labels.region}"}}},
				})
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", map[string]string{"region": "eu"}), cluster("b", nil)},
					Applications: []*fleet.Application{app}}
			},
			class: fleet.ErrInvalidValue,
			want:  []string{"apps/web/app.yaml:1: spec.syncPolicies[0].overrides.images[0].newTag", `the cluster has no label "region"`, "cluster b"},
		},
		{
			name: "cluster lacks a label used deep in Helm values",
			build: func(t *testing.T, root string) *fleet.Repo {
				chart := filepath.Join(root, "apps", "api", "chart")
				if err := os.MkdirAll(chart, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: api\nversion: 1.0.0\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				app := &fleet.Application{
					Metadata: fleet.ObjectMeta{Name: "api"},
					Spec: fleet.ApplicationSpec{
						Source: fleet.AppSource{Helm: &fleet.HelmSource{Path: "chart"}},
						SyncPolicies: []fleet.SyncPolicy{{
							Destination: fleet.Destination{Clusters: []string{"a"}},
							Overrides: &fleet.Overrides{Values: &runtime.RawExtension{
								Raw: []byte(`{"ingress":{"hosts":["x","${cluster.labels.zone}.example.com"]}}`)}},
						}},
					},
					Source: fleet.Source{File: "apps/api/app.yaml", Line: 1},
				}
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil)}, Applications: []*fleet.Application{app}}
			},
			class: fleet.ErrInvalidValue,
			want:  []string{"spec.syncPolicies[0].overrides.values.ingress.hosts[1]", `no label "zone"`},
		},
		{
			name: "two fleets of a cluster declare a namespace differently",
			build: func(t *testing.T, root string) *fleet.Repo {
				f1 := &fleet.Fleet{Metadata: fleet.ObjectMeta{Name: "one"}, Source: fleet.Source{File: "fleets/one.yaml", Line: 1},
					Spec: fleet.FleetSpec{Clusters: []string{"a"}, Namespaces: []fleet.NamespaceSpec{{Name: "shop", Labels: map[string]string{"team": "x"}}}}}
				f2 := &fleet.Fleet{Metadata: fleet.ObjectMeta{Name: "two"}, Source: fleet.Source{File: "fleets/two.yaml", Line: 1},
					Spec: fleet.FleetSpec{Clusters: []string{"a"}, Namespaces: []fleet.NamespaceSpec{{Name: "other"}, {Name: "shop", Labels: map[string]string{"team": "y"}}}}}
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil)}, Fleets: []*fleet.Fleet{f1, f2}}
			},
			class: ErrConflict,
			want:  []string{"fleets/two.yaml:1: spec.namespaces[1]", "namespace shop is declared differently in fleets/one.yaml"},
		},
		{
			name: "one workload divided twice on a cluster",
			build: func(t *testing.T, root string) *fleet.Repo {
				div := func(dest ...string) fleet.SyncPolicy {
					return fleet.SyncPolicy{
						Destination: fleet.Destination{Clusters: dest},
						ReplicaScheduling: &fleet.ReplicaScheduling{
							Target: fleet.WorkloadRef{Name: "web"}, Replicas: 4,
							WeightPreference: fleet.WeightPreference{StaticWeightList: []fleet.StaticClusterWeight{
								{TargetCluster: fleet.ClusterAffinity{ClusterNames: dest}, Weight: 1}}},
						},
					}
				}
				app := manifestsApp(t, root, "web", div("a", "b"), div("b", "c"))
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil), cluster("b", nil), cluster("c", nil)},
					Applications: []*fleet.Application{app}}
			},
			class: ErrConflict,
			want:  []string{"apps/web/app.yaml:1: spec.syncPolicies[1].replicaScheduling.target", "workload web is also divided by spec.syncPolicies[0]", "cluster b"},
		},
		{
			name: "source directory missing",
			build: func(t *testing.T, root string) *fleet.Repo {
				app := manifestsApp(t, root, "web", toClusters("a"))
				app.Spec.Source.Manifests.Path = "nope"
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil)}, Applications: []*fleet.Application{app}}
			},
			class: fleet.ErrDanglingReference,
			want:  []string{"apps/web/app.yaml:1: spec.source.manifests.path", "apps/web/nope does not exist"},
		},
		{
			name: "kustomization referencing outside the repo",
			build: func(t *testing.T, root string) *fleet.Repo {
				dir := filepath.Join(root, "apps", "web", "k")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources:\n  - ../../../../outside\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				app := &fleet.Application{Metadata: fleet.ObjectMeta{Name: "web"}, Source: fleet.Source{File: "apps/web/app.yaml", Line: 1},
					Spec: fleet.ApplicationSpec{Source: fleet.AppSource{Kustomize: &fleet.PathSource{Path: "k"}}, SyncPolicies: []fleet.SyncPolicy{toClusters("a")}}}
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil)}, Applications: []*fleet.Application{app}}
			},
			class: fleet.ErrInvalidValue,
			want:  []string{"apps/web/app.yaml:1: spec.source.kustomize.path", "apps/web/k/kustomization.yaml", "path leaves the repo"},
		},
		{
			name: "replica division without any weight",
			build: func(t *testing.T, root string) *fleet.Repo {
				app := manifestsApp(t, root, "web", fleet.SyncPolicy{
					Destination: fleet.Destination{Clusters: []string{"a"}},
					ReplicaScheduling: &fleet.ReplicaScheduling{Target: fleet.WorkloadRef{Name: "web"}, Replicas: 2,
						WeightPreference: fleet.WeightPreference{StaticWeightList: []fleet.StaticClusterWeight{
							{TargetCluster: fleet.ClusterAffinity{ClusterNames: []string{"a"}}, Weight: 0}}}},
				})
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil)}, Applications: []*fleet.Application{app}}
			},
			class: fleet.ErrInvalidValue,
			want:  []string{"apps/web/app.yaml:1: spec.syncPolicies[0].replicaScheduling", "every weight is zero"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			repo := tt.build(t, root)
			out, err := Compile(context.Background(), repo, tt.opts)
			if err == nil {
				t.Fatalf("Compile() succeeded with %d clusters, want an error", len(out.Clusters))
			}
			var list fleet.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %v is not a fleet.ErrorList", err)
			}
			if len(list) != 1 {
				t.Fatalf("want exactly one error, got %d:\n%v", len(list), err)
			}
			if !errors.Is(err, tt.class) {
				t.Errorf("error %v is not %v", err, tt.class)
			}
			for _, w := range tt.want {
				if !strings.Contains(list[0].Error(), w) {
					t.Errorf("error %q lacks %q", list[0].Error(), w)
				}
			}
		})
	}
}

func TestCompileUnknownCluster(t *testing.T) {
	repo := &fleet.Repo{Root: t.TempDir(), Clusters: []*fleet.Cluster{cluster("a", nil)}}
	_, err := Compile(context.Background(), repo, Options{Clusters: []string{"a", "zz"}})
	if !errors.Is(err, ErrUnknownCluster) || !strings.Contains(err.Error(), `"zz"`) {
		t.Fatalf("err = %v, want ErrUnknownCluster naming zz", err)
	}
}

// TestCompileAggregatesAcrossClusters: the same problem on many clusters is
// one error naming a few of them and counting the rest.
func TestCompileAggregatesAcrossClusters(t *testing.T) {
	root := t.TempDir()
	var clusters []*fleet.Cluster
	var names []string
	for _, n := range []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"} {
		clusters = append(clusters, cluster(n, nil))
		names = append(names, n)
	}
	db := manifestsApp(t, root, "db", toClusters("c1"))
	api := manifestsApp(t, root, "api", toClusters(names...))
	api.Spec.DependsOn = []string{"db"}
	_, err := Compile(context.Background(), &fleet.Repo{Root: root, Clusters: clusters, Applications: []*fleet.Application{api, db}}, Options{})
	var list fleet.ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("want one aggregated error, got %v", err)
	}
	if !strings.Contains(list[0].Detail, "clusters c2, c3, c4, c5, c6 and 2 more") {
		t.Errorf("detail %q does not aggregate the clusters", list[0].Detail)
	}
}
