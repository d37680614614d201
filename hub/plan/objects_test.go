package plan

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/pkg/slice"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestNormalizeDropsGeneratedNoiseOnly(t *testing.T) {
	in := obj(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  uid: 1234
  resourceVersion: "7"
  generation: 3
  creationTimestamp: null
  managedFields: [{manager: flotilla}]
  labels:
    helm.sh/chart: web-1.2.3
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"secret": "x"}'
spec:
  replicas: 2
status:
  readyReplicas: 2
`)
	got := newMasker([]byte("k")).normalize(in)
	want := obj(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels:
    helm.sh/chart: web-1.2.3
spec:
  replicas: 2
`)
	if toYAML(got.Object) != toYAML(want.Object) {
		t.Errorf("normalize:\n%s\nwant:\n%s", toYAML(got.Object), toYAML(want.Object))
	}
	if _, ok := in.Object["status"]; !ok {
		t.Error("normalize modified its input")
	}
}

func TestMaskSecretValues(t *testing.T) {
	secret := func(password string) *unstructured.Unstructured {
		return obj(t, `
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: shop}
data:
  token: c2VjcmV0LXRva2Vu
stringData:
  password: `+password+`
  nested: {a: b}
`)
	}
	m := newMasker([]byte("key"))
	a, b := m.normalize(secret("hunter2")), m.normalize(secret("hunter3"))
	ya, yb := toYAML(a.Object), toYAML(b.Object)
	for _, leaked := range []string{"hunter", "c2VjcmV0LXRva2Vu", "a: b"} {
		if strings.Contains(ya+yb, leaked) {
			t.Errorf("masked Secret contains %q:\n%s", leaked, ya)
		}
	}
	if a.Object["data"].(map[string]any)["token"] != b.Object["data"].(map[string]any)["token"] {
		t.Error("an unchanged value got different markers")
	}
	pa := a.Object["stringData"].(map[string]any)["password"].(string)
	pb := b.Object["stringData"].(map[string]any)["password"].(string)
	if pa == pb || !strings.HasPrefix(pa, "<masked: sha256:") {
		t.Errorf("changed value markers %q and %q: want two different markers", pa, pb)
	}
	// Another key (another run) gives other markers: nothing to compare
	// across plans or brute-force offline.
	if other := newMasker([]byte("other")).normalize(secret("hunter2")); toYAML(other.Object) == ya {
		t.Error("markers do not depend on the key")
	}
	// A ConfigMap is not masked.
	cm := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: visible}\n")
	if !strings.Contains(toYAML(m.normalize(cm).Object), "visible") {
		t.Error("a ConfigMap was masked")
	}
}

func TestDiffObjects(t *testing.T) {
	dep := func(replicas string) *unstructured.Unstructured {
		return obj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec: {replicas: "+replicas+"}\n")
	}
	svc := obj(t, "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n")
	cm := obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: old, namespace: shop}\n")
	// apps/v1beta1 → apps/v1 is the same object, changed.
	old := obj(t, "apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec: {replicas: 1}\n")

	got, err := diffObjects([]*unstructured.Unstructured{old, cm, svc}, []*unstructured.Unstructured{svc, dep("3")})
	if err != nil {
		t.Fatal(err)
	}
	var summary []string
	for _, o := range got {
		summary = append(summary, string(o.Change)+" "+o.ID())
	}
	want := []string{"changed Deployment shop/web", "removed ConfigMap shop/old"}
	if strings.Join(summary, "; ") != strings.Join(want, "; ") {
		t.Fatalf("diffObjects: %q, want %q", summary, want)
	}
	if d := got[0].Diff; !strings.Contains(d, "-apiVersion: apps/v1beta1\n+apiVersion: apps/v1\n") || !strings.Contains(d, "-  replicas: 1\n+  replicas: 3\n") {
		t.Errorf("diff:\n%s", d)
	}
	if got[0].After == nil || got[1].After != nil {
		t.Error("After must be set for changed objects and absent for removed ones")
	}
}

func TestNotes(t *testing.T) {
	dep := func(replicas int) *unstructured.Unstructured {
		return obj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nginx, namespace: web}\nspec: {replicas: "+itoa(replicas)+"}\n")
	}
	job := func(replicas int) *unstructured.Unstructured {
		return obj(t, "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: tf-training, namespace: ml}\nspec: {tasks: [{name: w, replicas: "+itoa(replicas)+"}]}\n")
	}
	list := func(o ...*unstructured.Unstructured) []*unstructured.Unstructured { return o }
	var n noteCollector
	n.observe("member1", "nginx", list(dep(3)), list(dep(2)))
	n.observe("member2", "nginx", list(dep(1)), list(dep(2)))
	n.observe("member3", "nginx", nil, list(dep(1))) // added with the re-division
	n.observe("member1", "job-tf-training", list(job(4)), nil)
	n.observe("member2", "job-tf-training", nil, list(job(4)))
	// An application added to a cluster is no replica move.
	n.observe("edge-1", "redis", nil, list(obj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: redis}\n")))
	// Nor is a workload scaled on one cluster only, here or elsewhere.
	api := func(replicas int) *unstructured.Unstructured {
		return obj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: shop}\nspec: {replicas: "+itoa(replicas)+"}\n")
	}
	n.observe("member1", "api", list(api(2)), list(api(5)))
	n.observe("member2", "api", list(api(1)), list(api(1)))
	got := n.notes()
	want := []string{
		"nginx: member1 3→2 replicas, member2 1→2, member3 0→1",
		"job tf-training: placed on member2 (was member1)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A Divided job re-divided in place.
	var d noteCollector
	d.observe("member1", "job-x", list(job(4)), list(job(2)))
	d.observe("member2", "job-x", nil, list(job(2)))
	want = []string{"job tf-training: member1 4→2 replicas, member2 0→2", "job tf-training: placed on member2; changed on member1"}
	if got := d.notes(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func itoa(i int) string { return strings.TrimSpace(toYAML(i)) }

func TestSettingsDiff(t *testing.T) {
	b := testUnit("web")
	h := testUnit("web")
	h.Prune = false
	h.DependsOn = []string{"db"}
	got := settingsDiff(&b, &h)
	want := []string{"dependsOn: (none) → db", "prune: true → false"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("settingsDiff: %q, want %q", got, want)
	}

	widget := slice.HealthCheck{APIVersion: "example.com/v1", Kind: "Widget", Current: "true"}
	h = testUnit("web")
	h.WaitForTimeout = true
	h.HealthChecks = []slice.HealthCheck{widget, {APIVersion: "batch.volcano.sh/v1alpha1", Current: "true"}}
	got = settingsDiff(&b, &h)
	want = []string{"failFast: true → false", "healthChecks: (none) → example.com/v1/Widget,batch.volcano.sh/v1alpha1"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("settingsDiff: %q, want %q", got, want)
	}
	b, h = testUnit("web"), testUnit("web")
	b.HealthChecks = []slice.HealthCheck{widget}
	widget.Current = "status.ok"
	h.HealthChecks = []slice.HealthCheck{widget}
	if got := settingsDiff(&b, &h); strings.Join(got, "; ") != "healthChecks: expressions changed" {
		t.Errorf("settingsDiff of a changed expression: %q", got)
	}
}

func testUnit(name string) slice.Unit {
	return slice.Unit{
		Name: name, Kind: slice.UnitKustomize, Path: slice.UnitDir("c", name),
		Prune: true, Wait: true, Timeout: metav1.Duration{Duration: time.Minute},
		Hash: "sha256:" + strings.Repeat("0", 64),
	}
}

// TestNormalizeShowsSOPSMarkers: a value the hub rendered from a
// SOPS-encrypted file shows as its ciphertext marker (plain or, from a
// secretGenerator, base64-encoded); other values stay masked.
func TestNormalizeShowsSOPSMarkers(t *testing.T) {
	marker := "sops-encrypted:sha256:0123456789abcdef"
	in := obj(t, `
apiVersion: v1
kind: Secret
metadata: {name: db}
stringData:
  password: `+marker+`
  plain: hunter2
data:
  token: `+base64.StdEncoding.EncodeToString([]byte(marker))+`
  other: aHVudGVyMg==
`)
	got := newMasker([]byte("k")).normalize(in)
	for _, tc := range []struct{ field, key, want string }{
		{"stringData", "password", "<" + marker + ">"},
		{"data", "token", "<" + marker + ">"},
	} {
		if v, _, _ := unstructured.NestedString(got.Object, tc.field, tc.key); v != tc.want {
			t.Errorf("%s.%s = %q, want %q", tc.field, tc.key, v, tc.want)
		}
	}
	for _, k := range []string{"stringData.plain", "data.other"} {
		f, key, _ := strings.Cut(k, ".")
		if v, _, _ := unstructured.NestedString(got.Object, f, key); !strings.HasPrefix(v, "<masked: ") {
			t.Errorf("%s = %q, want masked", k, v)
		}
	}
}
