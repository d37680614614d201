package apply_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

const webV1 = `
apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: web
  namespace: %[1]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: %[1]s
data:
  color: blue
---
apiVersion: v1
kind: Secret
metadata:
  name: web-secret
  namespace: %[1]s
stringData:
  password: s3cr3t-value
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: %[1]s
spec:
  selector: {app: web}
  ports:
  - port: 80
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %[1]s
spec:
  replicas: 0
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      serviceAccountName: web
      containers:
      - name: web
        image: nginx:1.27
        ports:
        - containerPort: 80
`

func TestApplyCreatesThenCostsNoWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "cold")
	ns := "cold-app"
	u := apply.UnitRequest{Name: "web", Revision: "main@sha1:1", Hash: "sha256:1", Objects: parse(t, fmt.Sprintf(webV1, ns)), Prune: true}

	res := f.apply(u)
	if res.Created != 6 || res.Configured != 0 || res.Skipped || !res.Ready || res.ManagedObjects != 6 {
		t.Fatalf("first apply: %+v", res)
	}
	if len(res.ChangeSet) != 6 || res.ChangeSet[0].Subject != "Namespace/"+ns || res.ChangeSet[0].Action != ssa.CreatedAction {
		t.Fatalf("change set: %+v", res.ChangeSet)
	}
	dep := f.get("apps/v1", "Deployment", ns, "web")
	if dep.GetLabels()[apply.LabelManagedBy] != "flotilla" || dep.GetLabels()[apply.LabelUnit] != "web" {
		t.Fatalf("ownership labels: %v", dep.GetLabels())
	}
	if mf := dep.GetManagedFields(); len(mf) == 0 || mf[0].Manager != "flotilla" || mf[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("field manager: %+v", mf)
	}
	sec := &corev1.Secret{}
	if err := f.k.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "web-secret"}, sec); err != nil || string(sec.Data["password"]) != "s3cr3t-value" {
		t.Fatalf("secret: %v %v", err, sec.Data)
	}

	// The inventory is in the cluster.
	cm := &corev1.ConfigMap{}
	if err := f.k.Get(ctx(t), client.ObjectKey{Namespace: f.invNS, Name: "flotilla-inventory-web"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["hash"] != "sha256:1" || cm.Data["revision"] != "main@sha1:1" || cm.Data["prune"] != "true" || cm.Data["count"] != "6" {
		t.Fatalf("inventory: %v", cm.Data)
	}
	if strings.Contains(cm.Data["objects"], "s3cr3t") {
		t.Fatal("inventory holds secret data")
	}

	// Same unit again, from this Applier and from a restarted one: no
	// mutating request, not even a dry-run.
	for i, a := range []*apply.Applier{f.a, f.newApplier()} {
		f.a = a
		f.counter.Reset()
		u.Revision = fmt.Sprintf("main@sha1:%d", i+2) // a new commit that does not touch the unit
		res = f.apply(u)
		if !res.Skipped || res.Unchanged != 6 || res.Applied() != 0 || res.DriftCorrected != 0 {
			t.Fatalf("pass %d: %+v", i, res)
		}
		if w, d := f.counter.Writes(), f.counter.DryRuns(); w != 0 || d != 0 {
			t.Fatalf("pass %d: %d writes, %d dry-runs, want none", i, w, d)
		}
	}

	// Force re-applies every object; the server finds nothing to change.
	f.counter.Reset()
	res = f.apply(apply.UnitRequest{Name: "web", Hash: "sha256:1", Objects: parse(t, fmt.Sprintf(webV1, ns)), Prune: true, Force: true})
	if res.Skipped || res.Unchanged != 6 || f.counter.Writes() != 6 || f.counter.DryRuns() != 6 {
		t.Fatalf("force: %+v, %d writes %d dry-runs", res, f.counter.Writes(), f.counter.DryRuns())
	}

	// Same hash but different content (a Helm chart's random value): the
	// unit hash says nothing changed, so nothing is written.
	changed := parse(t, fmt.Sprintf(strings.Replace(webV1, "color: blue", "color: random-123", 1), ns))
	f.counter.Reset()
	res = f.apply(apply.UnitRequest{Name: "web", Hash: "sha256:1", Objects: changed, Prune: true})
	if !res.Skipped || f.counter.Writes() != 0 {
		t.Fatalf("same hash: %+v, %d writes", res, f.counter.Writes())
	}

	// A new hash with the content unchanged rewrites only the inventory.
	f.counter.Reset()
	res = f.apply(apply.UnitRequest{Name: "web", Revision: "main@sha1:9", Hash: "sha256:2", Objects: parse(t, fmt.Sprintf(webV1, ns)), Prune: true})
	if res.Skipped || res.Applied() != 0 || res.Unchanged != 6 {
		t.Fatalf("new hash, same content: %+v", res)
	}
	// The Secret is never content-hashed, so it is the one object re-applied (a no-op).
	if w := f.counter.Writes(); w != 2 {
		t.Fatalf("new hash, same content: %d writes, want 2 (inventory + the unhashed Secret)", w)
	}

	// Changing one object writes that object (and the inventory) only.
	f.counter.Reset()
	res = f.apply(apply.UnitRequest{Name: "web", Hash: "sha256:3", Objects: changed, Prune: true})
	// The Secret's apply is a no-op on the server and reported unchanged.
	if res.Configured != 1 || res.Unchanged != 5 {
		t.Fatalf("one change: %+v", res)
	}
	if got := f.get("v1", "ConfigMap", ns, "web-config"); got.Object["data"].(map[string]any)["color"] != "random-123" {
		t.Fatalf("configmap not updated: %v", got.Object["data"])
	}
	if w := f.counter.Writes(); w != 3 {
		t.Fatalf("one change: %d writes, want 3 (ConfigMap, Secret, inventory)", w)
	}
}

func TestDriftIsCorrected(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "drift")
	ns := "drift-app"
	u := apply.UnitRequest{Name: "web", Hash: "sha256:1", Objects: parse(t, fmt.Sprintf(webV1, ns)), Prune: true}
	f.apply(u)

	type edit struct {
		name   string
		mutate func()
		drift  bool
		check  func()
	}
	cmKey := client.ObjectKey{Namespace: ns, Name: "web-config"}
	update := func(fn func(cm *corev1.ConfigMap)) {
		cm := &corev1.ConfigMap{}
		if err := f.k.Get(ctx(t), cmKey, cm); err != nil {
			t.Fatal(err)
		}
		fn(cm)
		if err := f.k.Update(ctx(t), cm, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
	}
	colorIsBlue := func() {
		if c := f.get("v1", "ConfigMap", ns, "web-config").Object["data"].(map[string]any)["color"]; c != "blue" {
			t.Fatalf("color %v, want blue", c)
		}
	}
	edits := []edit{
		{"kubectl edit of a managed field", func() { update(func(cm *corev1.ConfigMap) { cm.Data["color"] = "red" }) }, true, colorIsBlue},
		{"managed field removed", func() { update(func(cm *corev1.ConfigMap) { delete(cm.Data, "color") }) }, true, colorIsBlue},
		{"ownership label removed", func() { update(func(cm *corev1.ConfigMap) { delete(cm.Labels, apply.LabelUnit) }) }, true, func() {
			if l := f.get("v1", "ConfigMap", ns, "web-config").GetLabels()[apply.LabelUnit]; l != "web" {
				t.Fatalf("unit label %q", l)
			}
		}},
		{"scaled by hand (merge patch)", func() {
			dep := &unstructured.Unstructured{}
			dep.SetAPIVersion("apps/v1")
			dep.SetKind("Deployment")
			dep.SetNamespace(ns)
			dep.SetName("web")
			if err := f.k.Patch(ctx(t), dep, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)), client.FieldOwner("kubectl-scale")); err != nil {
				t.Fatal(err)
			}
		}, true, func() {
			if r, _, _ := unstructured.NestedInt64(f.get("apps/v1", "Deployment", ns, "web").Object, "spec", "replicas"); r != 0 {
				t.Fatalf("replicas %d", r)
			}
		}},
		{"object deleted", func() {
			if err := f.k.Delete(ctx(t), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
				t.Fatal(err)
			}
		}, true, func() { f.get("v1", "Service", ns, "web") }},
		{"unrelated label added (not drift)", func() {
			update(func(cm *corev1.ConfigMap) { cm.Labels["team"] = "payments" })
		}, false, func() {
			if l := f.get("v1", "ConfigMap", ns, "web-config").GetLabels()["team"]; l != "payments" {
				t.Fatal("someone else's label was removed")
			}
		}},
		{"same value written by another manager (not drift)", func() {
			update(func(cm *corev1.ConfigMap) { cm.Data["color"] = "blue"; cm.Annotations = map[string]string{"note": "x"} })
		}, false, colorIsBlue},
	}
	for _, observed := range []bool{false, true} {
		for _, e := range edits {
			t.Run(fmt.Sprintf("%s/observed=%v", e.name, observed), func(t *testing.T) {
				e.mutate()
				f.counter.Reset()
				req := u
				if observed {
					obs, err := f.a.Observe(ctx(t))
					if err != nil {
						t.Fatal(err)
					}
					if obs.Len() < 5 {
						t.Fatalf("observation has %d objects", obs.Len())
					}
					req.Observed = obs
				}
				reads := f.counter.Reads()
				res := f.apply(req)
				e.check()
				if e.drift {
					if res.DriftCorrected != 1 || res.Skipped {
						t.Fatalf("want one drift correction: %+v", res)
					}
				} else if !res.Skipped || f.counter.Writes() != 0 {
					t.Fatalf("want no writes: %+v, %d writes", res, f.counter.Writes())
				}
				if observed && !e.drift && f.counter.Reads() != reads {
					t.Fatalf("with an observation an unchanged unit needs no reads, made %d", f.counter.Reads()-reads)
				}
				// The correction is stable: the next pass writes nothing.
				f.counter.Reset()
				if res := f.apply(u); !res.Skipped || f.counter.Writes() != 0 {
					t.Fatalf("after correction: %+v, %d writes", res, f.counter.Writes())
				}
			})
		}
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "prune")
	ns := "prune-app"
	all := parse(t, fmt.Sprintf(webV1, ns))
	f.apply(apply.UnitRequest{Name: "web", Hash: "1", Objects: all, Prune: true})

	// Someone adopts the ServiceAccount; the Service disables pruning.
	sa := &corev1.ServiceAccount{}
	if err := f.k.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "web"}, sa); err != nil {
		t.Fatal(err)
	}
	sa.Labels[apply.LabelUnit] = "someone-else"
	if err := f.k.Update(ctx(t), sa); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := f.k.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "web"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Annotations = map[string]string{apply.AnnotationPrune: apply.Disabled}
	if err := f.k.Update(ctx(t), svc); err != nil {
		t.Fatal(err)
	}

	// An empty render never prunes without allowEmpty.
	f.counter.Reset()
	_, err := f.a.Apply(ctx(t), apply.UnitRequest{Name: "web", Hash: "2", Prune: true})
	if !errors.Is(err, apply.ErrEmpty) || f.counter.Writes() != 0 {
		t.Fatalf("empty: %v, %d writes", err, f.counter.Writes())
	}
	f.get("apps/v1", "Deployment", ns, "web")

	// Keep the namespace and the config map only.
	res := f.apply(apply.UnitRequest{Name: "web", Hash: "3", Objects: []*unstructured.Unstructured{all[0], all[2]}, Prune: true})
	if got := subjects(res.Pruned); got != "Deployment/prune-app/web,Secret/prune-app/web-secret" {
		t.Fatalf("pruned %s", got)
	}
	if got := subjects(res.PruneKept); got != "Service/prune-app/web,ServiceAccount/prune-app/web" {
		t.Fatalf("kept %s", got)
	}
	if _, err := f.tryGet("v1", "Secret", ns, "web-secret"); !apierrors.IsNotFound(err) {
		t.Fatalf("secret not pruned: %v", err)
	}
	if _, err := f.tryGet("apps/v1", "Deployment", ns, "web"); !apierrors.IsNotFound(err) {
		t.Fatalf("deployment not pruned: %v", err)
	}
	f.get("v1", "Service", ns, "web")
	f.get("v1", "ServiceAccount", ns, "web")
	inv, err := f.a.Inventory(ctx(t), "web")
	if err != nil || len(inv.Entries) != 2 {
		t.Fatalf("inventory after prune: %v %+v", err, inv)
	}

	// Without prune, dropped objects are left (and reported orphaned).
	res = f.apply(apply.UnitRequest{Name: "web", Hash: "4", Objects: all[:1], Prune: false})
	if len(res.Pruned) != 0 || subjects(res.Orphaned) != "ConfigMap/prune-app/web-config" {
		t.Fatalf("no prune: %+v", res)
	}
	f.get("v1", "ConfigMap", ns, "web-config")

	// allowEmpty with prune removes everything the unit still owns.
	res = f.apply(apply.UnitRequest{Name: "web", Hash: "5", Prune: true, AllowEmpty: true})
	if got := subjects(res.Pruned); got != "Namespace/prune-app" {
		t.Fatalf("allowEmpty pruned %q", got)
	}
}

// TestPruneFailureIsRetried: a delete the agent is not allowed to make
// keeps the object in the inventory; the next apply of the unchanged unit
// retries it.
func TestPruneFailureIsRetried(t *testing.T) {
	t.Parallel()
	c := minimalCluster(t)
	f := newFixture(t, c, "pruneretry")
	ns := "pruneretry-app"
	if err := c.CreateNamespace(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	// RestrictedUser may do everything to ConfigMaps and Secrets except
	// delete Secrets.
	role := parse(t, fmt.Sprintf(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: ["*"]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: %[2]s}
`, "pruner-test", testenv.RestrictedUser))
	for _, o := range role {
		if err := f.k.Create(ctx(t), o); err != nil {
			t.Fatal(err)
		}
	}
	for _, can := range [][2]string{{"get", "configmaps"}, {"create", "secrets"}} {
		if err := c.WaitAllowed(ctx(t), testenv.RestrictedUser, can[0], "", can[1], ns); err != nil {
			t.Fatal(err)
		}
	}
	cfg := c.RestrictedRESTConfig()
	f.counter.Wrap(cfg)
	restricted, err := apply.New(cfg, apply.Options{InventoryNamespace: f.invNS})
	if err != nil {
		t.Fatal(err)
	}
	objs := parse(t, fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: keep, namespace: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: old, namespace: %[1]s}
stringData: {k: v}
`, ns))
	if _, err := restricted.Apply(ctx(t), apply.UnitRequest{Name: "app", Hash: "1", Objects: objs, Prune: true}); err != nil {
		t.Fatal(err)
	}
	res, err := restricted.Apply(ctx(t), apply.UnitRequest{Name: "app", Hash: "2", Objects: objs[:1], Prune: true})
	if !errors.Is(err, apply.ErrPrune) || subjects(res.PruneFailed) != "Secret/pruneretry-app/old" {
		t.Fatalf("want a prune failure: %v %+v", err, res)
	}
	var oe *apply.ObjectError
	if !errors.As(err, &oe) || oe.Kind != "Secret" || oe.Name != "old" || !apierrors.IsForbidden(err) {
		t.Fatalf("error does not name the object or lost its cause: %v", err)
	}
	inv, err := f.newApplier().Inventory(ctx(t), "app")
	if err != nil || len(inv.Entries) != 2 || inv.Entries[1].State != apply.Stale {
		t.Fatalf("failed delete must stay in the stored inventory: %v %+v", err, inv)
	}
	// Still forbidden: the unchanged unit retries and fails again.
	if _, err := restricted.Apply(ctx(t), apply.UnitRequest{Name: "app", Hash: "2", Objects: objs[:1], Prune: true}); !errors.Is(err, apply.ErrPrune) {
		t.Fatalf("retry: %v", err)
	}
	// Allowed now: the retry succeeds.
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("rbac.authorization.k8s.io/v1")
	cr.SetKind("ClusterRole")
	cr.SetName("pruner-test")
	if err := f.k.Patch(ctx(t), cr, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/rules/1/verbs/-","value":"delete"}]`))); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitAllowed(ctx(t), testenv.RestrictedUser, "delete", "", "secrets", ns); err != nil {
		t.Fatal(err)
	}
	res, err = restricted.Apply(ctx(t), apply.UnitRequest{Name: "app", Hash: "2", Objects: objs[:1], Prune: true})
	if err != nil || subjects(res.Pruned) != "Secret/pruneretry-app/old" {
		t.Fatalf("retry after grant: %v %+v", err, res)
	}
	if _, err := f.tryGet("v1", "Secret", ns, "old"); !apierrors.IsNotFound(err) {
		t.Fatalf("secret still there: %v", err)
	}
	f.counter.Reset()
	if res, err := restricted.Apply(ctx(t), apply.UnitRequest{Name: "app", Hash: "2", Objects: objs[:1], Prune: true}); err != nil || !res.Skipped || f.counter.Writes() != 0 {
		t.Fatalf("settled unit: %v %+v %d writes", err, res, f.counter.Writes())
	}
}

func TestReconcileDisabled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "disabled")
	ns := "disabled-app"
	docs := `
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: live-off, namespace: %[1]s}
data: {v: "%[2]s"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: git-off
  namespace: %[1]s
  annotations: {flotilla.dev/reconcile: "%[3]s"}
data: {v: "%[2]s"}
`
	f.apply(apply.UnitRequest{Name: "u", Hash: "1", Objects: parse(t, fmt.Sprintf(docs, ns, "1", "enabled")), Prune: true})
	// Disable live-off on the live object.
	cm := &corev1.ConfigMap{}
	if err := f.k.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "live-off"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Annotations = map[string]string{apply.AnnotationReconcile: apply.Disabled}
	if err := f.k.Update(ctx(t), cm); err != nil {
		t.Fatal(err)
	}
	// Git changes both and disables git-off.
	res := f.apply(apply.UnitRequest{Name: "u", Hash: "2", Objects: parse(t, fmt.Sprintf(docs, ns, "2", "disabled")), Prune: true})
	if res.Disabled != 2 || res.Configured != 0 {
		t.Fatalf("%+v", res)
	}
	for _, name := range []string{"live-off", "git-off"} {
		if v := f.get("v1", "ConfigMap", ns, name).Object["data"].(map[string]any)["v"]; v != "1" {
			t.Fatalf("%s was applied: v=%v", name, v)
		}
	}
	// Removed from Git: the live-disabled one is not pruned.
	res = f.apply(apply.UnitRequest{Name: "u", Hash: "3", Objects: parse(t, fmt.Sprintf(docs, ns, "2", "disabled"))[:1], Prune: true})
	if subjects(res.PruneKept) != "ConfigMap/disabled-app/live-off" || subjects(res.Pruned) != "ConfigMap/disabled-app/git-off" {
		t.Fatalf("pruned %v kept %v", res.Pruned, res.PruneKept)
	}
	f.get("v1", "ConfigMap", ns, "live-off")
}

func TestStagedCRDAndNamespace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "staged")
	docs := `
apiVersion: stage.example.com/v1
kind: Widget
metadata: {name: w1, namespace: staged-app}
spec: {size: 3}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: staged-app}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.stage.example.com}
spec:
  group: stage.example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: staged-widget-reader}
rules:
- apiGroups: [stage.example.com]
  resources: [widgets]
  verbs: [get]
---
apiVersion: v1
kind: Namespace
metadata: {name: staged-app}
`
	res := f.apply(apply.UnitRequest{Name: "widgets", Hash: "1", Objects: parse(t, docs), Prune: true})
	if res.Created != 5 {
		t.Fatalf("%+v", res)
	}
	var order []string
	for _, c := range res.ChangeSet {
		order = append(order, c.Subject)
	}
	if got := strings.Join(order, " "); got != "CustomResourceDefinition/widgets.stage.example.com Namespace/staged-app ClusterRole/staged-widget-reader ConfigMap/staged-app/c Widget/staged-app/w1" {
		t.Fatalf("apply order: %s", got)
	}
	w := f.get("stage.example.com/v1", "Widget", "staged-app", "w1")
	if s, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); s != 3 {
		t.Fatalf("widget: %v", w.Object)
	}
	f.counter.Reset()
	if res := f.apply(apply.UnitRequest{Name: "widgets", Hash: "1", Objects: parse(t, docs), Prune: true}); !res.Skipped || f.counter.Writes() != 0 {
		t.Fatalf("second pass: %+v", res)
	}
	// Pruning the whole unit deletes the custom resource before its CRD.
	res = f.apply(apply.UnitRequest{Name: "widgets", Hash: "2", Prune: true, AllowEmpty: true})
	if got := subjects(res.Pruned); got != "Widget/staged-app/w1,ConfigMap/staged-app/c,ClusterRole/staged-widget-reader,Namespace/staged-app,CustomResourceDefinition/widgets.stage.example.com" {
		t.Fatalf("prune order %s", got)
	}
}

// TestInvalidObjectLeavesClusterAsItWas: a new unit is created without
// dry-runs and rolled back when an object fails; an existing unit's stage
// is written only after every object of it passed a server-side dry-run.
func TestInvalidObjectLeavesClusterAsItWas(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "invalid")
	ns := "invalid-app"
	if err := f.c.CreateNamespace(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	docs := func(value string, port int) []*unstructured.Unstructured {
		return parse(t, fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: good, namespace: %[1]s}
data: {v: "%[2]s"}
---
apiVersion: v1
kind: Service
metadata: {name: bad, namespace: %[1]s}
spec:
  ports: [{port: %[3]d}]
`, ns, value, port))
	}
	res, err := f.a.Apply(ctx(t), apply.UnitRequest{Name: "u", Hash: "1", Objects: docs("1", 99999), Prune: true})
	var oe *apply.ObjectError
	if !errors.Is(err, apply.ErrApply) || !errors.As(err, &oe) || oe.Kind != "Service" || oe.Name != "bad" || !apierrors.IsInvalid(err) {
		t.Fatalf("want an apply error naming Service bad: %v", err)
	}
	if res.Applied() != 0 || len(res.ChangeSet) != 0 {
		t.Fatalf("result after roll back: %+v", res)
	}
	if _, err := f.tryGet("v1", "ConfigMap", ns, "good"); !apierrors.IsNotFound(err) {
		t.Fatalf("the ConfigMap created before the failure was not rolled back: %v", err)
	}
	// The ids were recorded before anything was created, so an interrupted
	// apply orphans nothing.
	inv, err := f.a.Inventory(ctx(t), "u")
	if err != nil || len(inv.Entries) != 2 || inv.Entries[0].State != apply.Pending || inv.Entries[1].State != apply.Pending {
		t.Fatalf("inventory: %v %+v", err, inv)
	}

	res = f.apply(apply.UnitRequest{Name: "u", Hash: "2", Objects: docs("1", 80), Prune: true})
	if res.Created != 2 {
		t.Fatalf("fixed: %+v", res)
	}
	// Now the unit exists: a bad change is caught by the dry-run before
	// the good change is written.
	_, err = f.a.Apply(ctx(t), apply.UnitRequest{Name: "u", Hash: "3", Objects: docs("2", 99999), Prune: true})
	if !errors.As(err, &oe) || oe.Op != "dry-run" || oe.Name != "bad" {
		t.Fatalf("want a dry-run error naming Service bad: %v", err)
	}
	if v := f.get("v1", "ConfigMap", ns, "good").Object["data"].(map[string]any)["v"]; v != "1" {
		t.Fatalf("ConfigMap written although its stage failed validation: v=%v", v)
	}
	inv, _ = f.a.Inventory(ctx(t), "u")
	if len(inv.Entries) != 2 || inv.Entries[0].State != apply.Applied || inv.Hash != "2" {
		t.Fatalf("inventory: %+v", inv)
	}
}

func TestImmutableField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "immutable")
	ns := "immutable-app"
	if err := f.c.CreateNamespace(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	dep := func(app string) []*unstructured.Unstructured {
		return parse(t, fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %s}
spec:
  replicas: 0
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec: {containers: [{name: c, image: nginx}]}
`, ns, app))
	}
	f.apply(apply.UnitRequest{Name: "u", Hash: "1", Objects: dep("a")})
	uid := f.get("apps/v1", "Deployment", ns, "web").GetUID()
	_, err := f.a.Apply(ctx(t), apply.UnitRequest{Name: "u", Hash: "2", Objects: dep("b")})
	if !errors.Is(err, apply.ErrImmutable) || !errors.Is(err, apply.ErrApply) || !strings.Contains(err.Error(), "Deployment/immutable-app/web") {
		t.Fatalf("want ErrImmutable naming the deployment: %v", err)
	}
	// The dry-run pass writes nothing: when a sibling of the same stage
	// fails its dry-run, the Deployment that needs re-creating is left as
	// it is.
	badService := parse(t, fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: bad, namespace: %s}\nspec:\n  ports: [{port: 99999}]\n", ns))
	_, err = f.a.Apply(ctx(t), apply.UnitRequest{Name: "u", Hash: "2b", Objects: append(dep("b"), badService...), RecreateImmutable: true})
	var oe *apply.ObjectError
	if !errors.As(err, &oe) || oe.Op != "dry-run" || oe.Name != "bad" {
		t.Fatalf("want the Service's dry-run error: %v", err)
	}
	if live := f.get("apps/v1", "Deployment", ns, "web"); live.GetUID() != uid {
		t.Fatalf("the Deployment was re-created although its sibling failed its dry-run")
	}
	res := f.apply(apply.UnitRequest{Name: "u", Hash: "2", Objects: dep("b"), RecreateImmutable: true})
	live := f.get("apps/v1", "Deployment", ns, "web")
	if live.GetUID() == uid || res.Created != 1 {
		t.Fatalf("not recreated: %+v", res)
	}
}

// TestSecretDataNeverInErrors applies a Secret the API server rejects while
// quoting its data back, and checks the error does not carry it.
func TestSecretDataNeverInErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "secret")
	ns := "secret-app"
	if err := f.c.CreateNamespace(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	const marker = "TOPSECRET-7f3a9c"
	for _, tc := range []struct{ name, doc string }{
		{"non-string data", `
apiVersion: v1
kind: Secret
metadata: {name: bad-shape, namespace: %s}
data:
  token: {nested: ` + marker + `}
`},
		{"non-string stringData", `
apiVersion: v1
kind: Secret
metadata: {name: bad-string, namespace: %s}
stringData:
  token: [` + marker + `]
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, fmt.Sprintf(tc.doc, ns))
			// The API server does quote the value back...
			raw := objs[0].DeepCopy()
			//lint:ignore SA1019 a raw server-side apply patch gives the API server's unmasked message
			rawErr := f.k.Patch(ctx(t), raw, client.Apply, client.FieldOwner("probe"), client.DryRunAll)
			if rawErr == nil || !strings.Contains(rawErr.Error(), marker) {
				t.Fatalf("probe: the server error should quote the value for this test to mean anything: %v", rawErr)
			}
			// ...and our error does not.
			_, err := f.a.Apply(ctx(t), apply.UnitRequest{Name: "s-" + strings.ReplaceAll(strings.ToLower(tc.name), " ", "-"), Hash: "1", Objects: objs})
			if err == nil || !errors.Is(err, apply.ErrApply) {
				t.Fatalf("want ErrApply: %v", err)
			}
			if strings.Contains(err.Error(), marker) || strings.Contains(fmt.Sprintf("%+v", err), marker) {
				t.Fatalf("secret data in error: %v", err)
			}
			var got, want apierrors.APIStatus
			if !errors.As(err, &got) || !errors.As(rawErr, &want) || got.Status().Code != want.Status().Code || got.Status().Reason != want.Status().Reason {
				t.Fatalf("API status lost: %v", err)
			}
			t.Logf("masked: %v", err)
		})
	}
}

func TestDeleteUnitAndUnits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "delete")
	mk := func(name string) []*unstructured.Unstructured {
		return parse(t, fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata: {name: %s, namespace: %s}
`, name, f.invNS))
	}
	f.apply(apply.UnitRequest{Name: "pruned", Hash: "1", Objects: mk("a"), Prune: true})
	f.apply(apply.UnitRequest{Name: "kept", Hash: "1", Objects: mk("b"), Prune: false})
	units, err := f.newApplier().Units(ctx(t))
	if err != nil || strings.Join(units, ",") != "kept,pruned" {
		t.Fatalf("units %v %v", units, err)
	}
	res, err := f.a.Delete(ctx(t), "pruned")
	if err != nil || subjects(res.Pruned) != "ConfigMap/inv-delete/a" {
		t.Fatalf("delete pruned: %v %+v", err, res)
	}
	res, err = f.a.Delete(ctx(t), "kept")
	if err != nil || subjects(res.Orphaned) != "ConfigMap/inv-delete/b" {
		t.Fatalf("delete kept: %v %+v", err, res)
	}
	f.get("v1", "ConfigMap", f.invNS, "b")
	if _, err := f.tryGet("v1", "ConfigMap", f.invNS, "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("a not deleted: %v", err)
	}
	if units, err := f.newApplier().Units(ctx(t)); err != nil || len(units) != 0 {
		t.Fatalf("units after delete: %v %v", units, err)
	}
	if _, err := f.a.Delete(ctx(t), "pruned"); !errors.Is(err, apply.ErrNoInventory) {
		t.Fatalf("second delete: %v", err)
	}
	if _, _, err := f.a.CheckReady(ctx(t), "never", nil); !errors.Is(err, apply.ErrNoInventory) {
		t.Fatalf("CheckReady of unknown unit: %v", err)
	}
}

func TestHealthInMinimalCluster(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "health")
	ns := "health-app"
	objs := parse(t, fmt.Sprintf(webV1, ns))
	// No controllers: the ConfigMap is Current, the Deployment never is.
	res := f.apply(apply.UnitRequest{Name: "config", Hash: "1", Objects: objs[:3], Wait: true, Timeout: 5e9})
	if !res.Ready {
		t.Fatalf("%+v", res)
	}
	res, err := f.a.Apply(ctx(t), apply.UnitRequest{Name: "web", Hash: "1", Objects: objs[5:], Wait: true, Timeout: 2e9})
	if !errors.Is(err, apply.ErrHealthTimeout) || res.Ready || len(res.NotReady) != 1 || !strings.HasPrefix(res.NotReady[0], "Deployment/health-app/web: InProgress") {
		t.Fatalf("want a health timeout naming the deployment: %v %+v", err, res)
	}
	// While it waits, the wait says what for; the test ends the wait at
	// the first report instead of waiting out a timeout.
	wctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	reports := make(chan []string, 1)
	_, err = f.a.Apply(wctx, apply.UnitRequest{Name: "web", Hash: "2", Objects: objs[5:], Wait: true, Timeout: 10 * time.Minute,
		Waiting: func(notReady []string) {
			select {
			case reports <- notReady:
			default:
			}
			cancel()
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want the wait ended by the test: %v", err)
	}
	if nr := <-reports; len(nr) != 1 || !strings.HasPrefix(nr[0], "Deployment/health-app/web: InProgress") {
		t.Fatalf("want the report to name the deployment and its kstatus: %q", nr)
	}
	if ready, _, err := f.a.CheckReady(ctx(t), "config", nil); !ready || err != nil {
		t.Fatalf("CheckReady config: %v %v", ready, err)
	}
	if ready, notReady, err := f.a.CheckReady(ctx(t), "web", nil); ready || err != nil || len(notReady) != 1 {
		t.Fatalf("CheckReady web: %v %v %v", ready, notReady, err)
	}
}

func TestCreateOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "createonly")
	doc := `
apiVersion: v1
kind: ConfigMap
metadata: {name: job, namespace: %s}
data: {v: "%s"}
`
	f.apply(apply.UnitRequest{Name: "job-1", Hash: "1", Objects: parse(t, fmt.Sprintf(doc, f.invNS, "1")), CreateOnly: true})
	f.counter.Reset()
	res := f.apply(apply.UnitRequest{Name: "job-1", Hash: "2", Objects: parse(t, fmt.Sprintf(doc, f.invNS, "2")), CreateOnly: true})
	if res.Applied() != 0 || res.Unchanged != 1 {
		t.Fatalf("%+v", res)
	}
	if v := f.get("v1", "ConfigMap", f.invNS, "job").Object["data"].(map[string]any)["v"]; v != "1" {
		t.Fatalf("create-only object was updated: %v", v)
	}
	if err := f.k.Delete(ctx(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.invNS, Name: "job"}}); err != nil {
		t.Fatal(err)
	}
	f.apply(apply.UnitRequest{Name: "job-1", Hash: "3", Objects: parse(t, fmt.Sprintf(doc, f.invNS, "2")), CreateOnly: true})
	if _, err := f.tryGet("v1", "ConfigMap", f.invNS, "job"); !apierrors.IsNotFound(err) {
		t.Fatalf("a completed create-only object must not be re-created: %v", err)
	}
}

// TestLargeUnit: a unit of 1,200 objects keeps its inventory in one
// ConfigMap and settles to zero writes.
func TestLargeUnit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "large")
	var b strings.Builder
	for i := range 1200 {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-with-a-longish-name-%05d, namespace: %s}\ndata: {i: \"%d\"}\n---\n", i, f.invNS, i)
	}
	objs := parse(t, b.String())
	res := f.apply(apply.UnitRequest{Name: "large", Hash: "1", Objects: objs, Prune: true})
	if res.Created != 1200 || res.ManagedObjects != 1200 {
		t.Fatalf("%+v", res.Created)
	}
	f.counter.Reset()
	if res, err := f.newApplier().Apply(ctx(t), apply.UnitRequest{Name: "large", Hash: "1", Objects: objs, Prune: true}); err != nil || !res.Skipped {
		t.Fatalf("second pass: %v %+v", err, res)
	}
	inv, err := f.newApplier().Inventory(ctx(t), "large")
	if err != nil || len(inv.Entries) != 1200 {
		t.Fatalf("inventory: %v", err)
	}
	if f.counter.Writes() != 0 {
		t.Fatalf("%d writes", f.counter.Writes())
	}
}

// TestHealthFullCluster waits for Deployments on kwok nodes: one becomes
// Available, one can never be scheduled and fails its progress deadline.
func TestHealthFullCluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Full})
	f := newFixture(t, c, "full")
	ns := "full-app"
	if err := c.CreateNamespace(ctx(t), ns); err != nil {
		t.Fatal(err)
	}
	deployment := func(name, nodeSelector string) []*unstructured.Unstructured {
		return parse(t, fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  replicas: 2
  progressDeadlineSeconds: 3
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      nodeSelector: {%[3]s}
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
      containers: [{name: c, image: registry.example/app:1}]
`, name, ns, nodeSelector))
	}
	res := f.apply(apply.UnitRequest{Name: "db", Hash: "1", Objects: deployment("db", ""), Wait: true, Timeout: 90e9})
	if !res.Ready {
		t.Fatalf("db not ready: %+v", res)
	}
	if ready, notReady, err := f.a.CheckReady(ctx(t), "db", nil); !ready || err != nil {
		t.Fatalf("CheckReady db: %v %v %v", ready, notReady, err)
	}
	res, err := f.a.Apply(ctx(t), apply.UnitRequest{Name: "web", Hash: "1", Objects: deployment("web", "no-such-label: x"), Wait: true, Timeout: 90e9})
	if !errors.Is(err, apply.ErrHealthFailed) || res.Ready || len(res.NotReady) != 1 || !strings.HasPrefix(res.NotReady[0], "Deployment/full-app/web: Failed") {
		t.Fatalf("want a failed health check naming the deployment: %v %+v", err, res)
	}
	if ready, notReady, err := f.a.CheckReady(ctx(t), "web", nil); ready || err != nil || len(notReady) != 1 {
		t.Fatalf("CheckReady web: %v %v %v", ready, notReady, err)
	}
}
