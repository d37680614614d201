package apply_test

import (
	"fmt"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/apply"
)

// TestImperativeDriftIsTakenOver: edits by kubectl's field managers that a
// forced apply alone cannot undo (a list item's key changed, an item
// added) are restored, a key changed by another manager too (the object is
// replaced), and the next pass writes nothing; a label set by hand stays.
func TestImperativeDriftIsTakenOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "takeover")
	ns := "takeover-app"
	u := apply.UnitRequest{Name: "web", Hash: "sha256:1", Objects: parse(t, fmt.Sprintf(webV1, ns)), Prune: true}
	f.apply(u)

	patch := func(obj client.Object, manager string, pt types.PatchType, body string) {
		obj.SetNamespace(ns)
		obj.SetName("web")
		if err := f.k.Patch(ctx(t), obj, client.RawPatch(pt, []byte(body)), client.FieldOwner(manager)); err != nil {
			t.Fatal(err)
		}
	}
	deployment := func() *appsv1.Deployment {
		d := &appsv1.Deployment{}
		if err := f.k.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	containerIsGits := func() {
		cs := deployment().Spec.Template.Spec.Containers
		if len(cs) != 1 || cs[0].Name != "web" || len(cs[0].Env) != 0 || len(cs[0].Ports) != 1 || cs[0].Ports[0].ContainerPort != 80 {
			t.Fatalf("containers not as in Git: %+v", cs)
		}
	}
	portIsGits := func() {
		svc := &corev1.Service{}
		if err := f.k.Get(ctx(t), client.ObjectKey{Namespace: ns, Name: "web"}, svc); err != nil {
			t.Fatal(err)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 {
			t.Fatalf("ports %+v, want only 80", svc.Spec.Ports)
		}
	}
	tests := []struct {
		name   string
		mutate func()
		check  func()
	}{
		{"service port changed by kubectl patch", func() {
			patch(&corev1.Service{}, "kubectl-patch", types.JSONPatchType, `[{"op":"replace","path":"/spec/ports/0/port","value":8080}]`)
		}, portIsGits},
		{"service port changed by a manager not taken over (replaced)", func() {
			patch(&corev1.Service{}, "deploy-script", types.JSONPatchType, `[{"op":"replace","path":"/spec/ports/0/port","value":8081}]`)
		}, portIsGits},
		{"container renamed", func() {
			patch(&appsv1.Deployment{}, "kubectl-patch", types.JSONPatchType, `[{"op":"replace","path":"/spec/template/spec/containers/0/name","value":"renamed"}]`)
		}, containerIsGits},
		{"env var and port added by kubectl edit", func() {
			d := deployment()
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
			c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
			if err := f.k.Update(ctx(t), d, client.FieldOwner("kubectl-edit")); err != nil {
				t.Fatal(err)
			}
		}, containerIsGits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.mutate()
			res := f.apply(u)
			tt.check()
			if res.DriftCorrected != 1 {
				t.Fatalf("want one drift correction: %+v", res)
			}
			f.counter.Reset()
			if res := f.apply(u); !res.Skipped || f.counter.Writes() != 0 {
				t.Fatalf("after correction: %+v, %d writes", res, f.counter.Writes())
			}
		})
	}

	t.Run("label set by kubectl label stays", func(t *testing.T) {
		patch(&appsv1.Deployment{}, "kubectl-label", types.MergePatchType, `{"metadata":{"labels":{"team":"payments"}}}`)
		f.counter.Reset()
		if res := f.apply(u); !res.Skipped || f.counter.Writes() != 0 {
			t.Fatalf("a label set by hand is not drift: %+v, %d writes", res, f.counter.Writes())
		}
		if l := deployment().Labels["team"]; l != "payments" {
			t.Fatalf("label team=%q", l)
		}
	})
}

func TestParseFieldManager(t *testing.T) {
	tests := []struct {
		in      string
		want    ssa.FieldManager
		wantErr bool
	}{
		{"kubectl:Update", ssa.FieldManager{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationUpdate}, false},
		{"kubectl:apply", ssa.FieldManager{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationApply}, false},
		{"=kubectl-edit:Update", ssa.FieldManager{Name: "kubectl-edit", ExactMatch: true, OperationType: metav1.ManagedFieldsOperationUpdate}, false},
		{"kubectl", ssa.FieldManager{}, true},
		{"kubectl:Patch", ssa.FieldManager{}, true},
		{":Update", ssa.FieldManager{}, true},
		{"=:Update", ssa.FieldManager{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := apply.ParseFieldManager(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ParseFieldManager(%q) = %+v, %v", tt.in, got, err)
			}
		})
	}
}
