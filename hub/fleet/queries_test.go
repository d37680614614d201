package fleet

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestQueriesGoodRepo(t *testing.T) {
	r, err := Load(context.Background(), "testdata/good")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) != 0 {
		t.Fatalf("warnings: %v", r.Warnings)
	}
	// A copy without the index must answer the same: the compiler's tests
	// may build a Repo by hand.
	bare := &Repo{Root: r.Root, Clusters: r.Clusters, Fleets: r.Fleets, Applications: r.Applications, GlobalJobs: r.GlobalJobs}
	for _, repo := range []*Repo{r, bare} {
		if got := names(repo.Members(repo.Fleet("cloud"))); got != "member1,member2" {
			t.Errorf("Members(cloud) = %s", got)
		}
		if got := names(repo.Members(repo.Fleet("production"))); got != "edge1,member1,member2" {
			t.Errorf("Members(production) = %s", got)
		}
		if got := fleetNames(repo.FleetsOf(repo.Cluster("member1"))); got != "cloud,production" {
			t.Errorf("FleetsOf(member1) = %s", got)
		}
		if got := fleetNames(repo.FleetsOf(repo.Cluster("edge1"))); got != "production" {
			t.Errorf("FleetsOf(edge1) = %s", got)
		}
		for _, tc := range []struct {
			dest Destination
			want string
		}{
			{Destination{Fleet: "production"}, "edge1,member1,member2"},
			{Destination{Fleet: "nope"}, ""},
			{Destination{Clusters: []string{"member2", "edge1", "member2", "nope"}}, "edge1,member2"},
			{Destination{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu-west"}}}, "edge1,member1"},
			{Destination{Selector: &metav1.LabelSelector{}}, "edge1,member1,member2"},
			{Destination{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "type", Operator: "Bogus"}}}}, ""},
		} {
			if got := names(repo.Resolve(tc.dest)); got != tc.want {
				t.Errorf("Resolve(%+v) = %q, want %q", tc.dest, got, tc.want)
			}
		}
		if repo.Cluster("nope") != nil || repo.Fleet("nope") != nil || repo.Application("nope") != nil {
			t.Error("lookup of a missing name returned an object")
		}
		if repo.Members(nil) != nil || repo.FleetsOf(nil) != nil {
			t.Error("nil arguments returned objects")
		}
	}
	// Results are copies: the caller may not corrupt the index.
	m := r.Members(r.Fleet("cloud"))
	m[0] = nil
	if got := names(r.Members(r.Fleet("cloud"))); got != "member1,member2" {
		t.Errorf("Members changed through a returned slice: %s", got)
	}

	nginx := r.Application("nginx")
	if nginx.AppDir() != "apps/nginx" || !nginx.PruneEnabled() || !nginx.WaitEnabled() || nginx.TimeoutOrDefault() != 2*time.Minute {
		t.Errorf("nginx defaults: %s %v %v %v", nginx.AppDir(), nginx.PruneEnabled(), nginx.WaitEnabled(), nginx.TimeoutOrDefault())
	}
	backend := r.Application("backend")
	if backend.PruneEnabled() || backend.TimeoutOrDefault() != DefaultTimeout {
		t.Errorf("backend: prune %v timeout %v", backend.PruneEnabled(), backend.TimeoutOrDefault())
	}
	if c := r.Cluster("edge1"); c.Source.File != "clusters/edge/edge1.yaml" || c.Source.Line != 1 {
		t.Errorf("edge1 source = %+v", c.Source)
	}
	rs := nginx.Spec.SyncPolicies[0].ReplicaScheduling
	if rs.Replicas != 4 || rs.WeightPreference.StaticWeightList[0].Weight != 3 {
		t.Errorf("nginx replicaScheduling = %+v", rs)
	}
	if q := r.Fleet("cloud").Spec.Queues[0].Capability["nvidia.com/gpu"]; q.Value() != 8 {
		t.Errorf("queue gpu capability = %s", q.String())
	}
	if tasks := r.GlobalJobs[0].Spec.Template.Tasks; len(tasks) != 1 || tasks[0].Replicas != 4 {
		t.Errorf("train tasks = %+v", tasks)
	}
}

func fleetNames(fs []*Fleet) string {
	out := ""
	for i, f := range fs {
		if i > 0 {
			out += ","
		}
		out += f.Metadata.Name
	}
	return out
}

func TestExpandClusterVars(t *testing.T) {
	c := &Cluster{Metadata: ObjectMeta{Name: "member1", Labels: map[string]string{"region": "eu", "app.kubernetes.io/tier": "gold"}}}
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"plain", "plain", false},
		{"${cluster.name}-${cluster.labels.region}", "member1-eu", false},
		{"${cluster.labels.app.kubernetes.io/tier}", "gold", false},
		{"echo ${HOME} ${cluster.name}", "echo ${HOME} member1", false},
		{"${cluster.labels.zone}", "", true},
		{"${cluster.region}", "", true},
		{"${cluster.name", "", true},
	} {
		got, err := ExpandClusterVars(tc.in, c)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ExpandClusterVars(%q) = %q, %v", tc.in, got, err)
		}
		if _, err := ClusterVars(tc.in); tc.in != "${cluster.labels.zone}" && (err != nil) != tc.err {
			t.Errorf("ClusterVars(%q) error = %v", tc.in, err)
		}
	}
}

// TestHealthChecksOn: an application's own checks, then its cluster's
// fleets' defaults (fleets by name) for the kinds it does not check; the
// first check of a kind wins.
func TestHealthChecksOn(t *testing.T) {
	widget := func(current string) CustomHealthCheck {
		return CustomHealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: current}
	}
	group := CustomHealthCheck{APIVersion: "batch.volcano.sh/v1alpha1", Current: "true"}
	c := &Cluster{Metadata: ObjectMeta{Name: "c1"}}
	r := &Repo{
		Clusters: []*Cluster{c},
		Fleets: []*Fleet{
			{Metadata: ObjectMeta{Name: "b"}, Spec: FleetSpec{Clusters: []string{"c1"}, HealthChecks: []CustomHealthCheck{widget("from b"), group}}},
			{Metadata: ObjectMeta{Name: "a"}, Spec: FleetSpec{Clusters: []string{"c1"}, HealthChecks: []CustomHealthCheck{widget("from a")}}},
			{Metadata: ObjectMeta{Name: "other"}, Spec: FleetSpec{Clusters: []string{"c2"}, HealthChecks: []CustomHealthCheck{{APIVersion: "x/v1", Kind: "X", Current: "true"}}}},
		},
	}
	plain := &Application{}
	if got := r.HealthChecksOn(plain, c); len(got) != 2 || got[0] != widget("from a") || got[1] != group {
		t.Errorf("fleet defaults: %+v", got)
	}
	own := &Application{Spec: ApplicationSpec{HealthChecks: []CustomHealthCheck{widget("own")}}}
	if got := r.HealthChecksOn(own, c); len(got) != 2 || got[0] != widget("own") || got[1] != group {
		t.Errorf("the application's own check first: %+v", got)
	}
}
