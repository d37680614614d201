package apply_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-gitops/flotilla/agent/apply"
)

// TestPruneKeepsNamespaceWithUnmanagedObjects: deleting a unit prunes its
// objects but not its Namespace while that holds a ConfigMap Flotilla does
// not manage; the result says which. Once that object is gone, a unit that
// prunes the Namespace deletes it.
func TestPruneKeepsNamespaceWithUnmanagedObjects(t *testing.T) {
	t.Parallel()
	f := newFixture(t, minimalCluster(t), "nskeep")
	const ns = "nskeep-app"
	unit := parse(t, `apiVersion: v1
kind: Namespace
metadata:
  name: nskeep-app
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ours
  namespace: nskeep-app
data:
  a: "1"
`)
	f.apply(apply.UnitRequest{Name: "nskeep", Hash: "1", Objects: unit, Prune: true})
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: ns}, Data: map[string]string{"b": "2"}}
	if err := f.k.Create(ctx(t), theirs); err != nil {
		t.Fatal(err)
	}

	res, err := f.a.Delete(ctx(t), "nskeep")
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got := subjects(res.Pruned); got != "ConfigMap/nskeep-app/ours" {
		t.Errorf("pruned %s", got)
	}
	if got := subjects(res.PruneKept); got != "Namespace/nskeep-app" {
		t.Errorf("kept %s", got)
	}
	if len(res.KeptNamespaces) != 1 || !strings.Contains(res.KeptNamespaces[0], "ConfigMap/nskeep-app/theirs") {
		t.Errorf("reasons %q", res.KeptNamespaces)
	}
	nsObj := f.get("v1", "Namespace", "", ns)
	if nsObj.GetDeletionTimestamp() != nil {
		t.Fatalf("namespace is being deleted")
	}
	f.get("v1", "ConfigMap", ns, "theirs")

	// Without others' objects the Namespace is pruned as before.
	if err := f.k.Delete(ctx(t), theirs); err != nil {
		t.Fatal(err)
	}
	f.apply(apply.UnitRequest{Name: "nskeep", Hash: "2", Objects: unit, Prune: true})
	res, err = f.a.Delete(ctx(t), "nskeep")
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if len(res.KeptNamespaces) != 0 || !strings.Contains(subjects(res.Pruned), "Namespace") {
		t.Errorf("second delete: pruned %v kept %v %q", res.Pruned, res.PruneKept, res.KeptNamespaces)
	}
	if u, err := f.tryGet("v1", "Namespace", "", ns); err == nil && u.GetDeletionTimestamp() == nil {
		t.Errorf("namespace not deleted")
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}
