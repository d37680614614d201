package apply_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// One minimal cluster (etcd + kube-apiserver) serves every test of the
// package that needs no controllers; each test works in its own namespaces.
var minimal = &testenv.Shared{Name: "apply", Options: testenv.ClusterOptions{Mode: testenv.Minimal}}

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	minimal.Close(code)
	os.Exit(code)
}

func minimalCluster(t *testing.T) *testenv.Cluster {
	t.Helper()
	return minimal.Get(t)
}

// fixture is one test's view of a cluster: an inventory namespace of its
// own and Appliers whose requests are counted.
type fixture struct {
	t       *testing.T
	c       *testenv.Cluster
	k       client.Client
	invNS   string
	counter *apply.WriteCounter
	a       *apply.Applier
}

func newFixture(t *testing.T, c *testenv.Cluster, name string) *fixture {
	t.Helper()
	f := &fixture{t: t, c: c, k: c.Client(), invNS: "inv-" + name, counter: &apply.WriteCounter{}}
	if err := c.CreateNamespace(ctx(t), f.invNS); err != nil {
		t.Fatal(err)
	}
	f.a = f.newApplier()
	return f
}

// newApplier returns a fresh Applier, as after an agent restart.
func (f *fixture) newApplier() *apply.Applier {
	f.t.Helper()
	cfg := f.c.RESTConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	f.counter.Wrap(cfg)
	a, err := apply.New(cfg, apply.Options{
		InventoryNamespace: f.invNS, Cluster: "test", PollInterval: 200 * time.Millisecond, DefaultTimeout: 30 * time.Second,
		WaitReport: 200 * time.Millisecond,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

func (f *fixture) apply(u apply.UnitRequest) *apply.UnitResult {
	f.t.Helper()
	start := time.Now()
	res, err := f.a.Apply(ctx(f.t), u)
	f.t.Logf("apply %s took %v", u.Name, time.Since(start))
	if err != nil {
		f.t.Fatalf("apply %s: %v", u.Name, err)
	}
	return res
}

// get reads a live object, failing the test unless it exists.
func (f *fixture) get(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	f.t.Helper()
	u, err := f.tryGet(apiVersion, kind, ns, name)
	if err != nil {
		f.t.Fatalf("get %s %s/%s: %v", kind, ns, name, err)
	}
	return u
}

func (f *fixture) tryGet(apiVersion, kind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := f.k.Get(ctx(f.t), client.ObjectKey{Namespace: ns, Name: name}, u)
	return u, err
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// parse reads "---"-separated YAML documents.
func parse(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("parse %q: %v", doc, err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

func subjects(names []string) string { return strings.Join(names, ",") }
