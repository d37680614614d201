package chartvendor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/pkg/render"
)

func TestMain(m *testing.M) {
	// Vendored charts are rendered in Helm worker processes re-executing
	// this test binary.
	render.ServeWorkerIfRequested()
	os.Exit(m.Run())
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among %d objects", kind, name, len(objs))
	return nil
}

func wantString(t *testing.T, o *unstructured.Unstructured, want string, fields ...string) {
	t.Helper()
	got, _, _ := unstructured.NestedString(o.Object, fields...)
	if got != want {
		t.Errorf("%s %s: %s = %q, want %q", o.GetKind(), o.GetName(), strings.Join(fields, "."), got, want)
	}
}
