package chartvendor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

func TestMain(m *testing.M) {
	// Vendored charts are rendered in Helm worker processes re-executing
	// this test binary.
	render.ServeWorkerIfRequested()
	os.Exit(m.Run())
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

// demoChart is a chart whose ConfigMap tells its version and the value
// message (msg by default).
func demoChart(name, version, msg string) *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: version},
		Values:   map[string]any{"message": msg},
		Templates: []*chart.File{{
			Name: "templates/configmap.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  version: {{ .Chart.Version | quote }}\n  message: {{ .Values.message | quote }}\n"),
		}},
	}
}

// renderVendored renders the vendored demo chart at chartPath as release
// demo with message "vendored" and returns its ConfigMap.
func renderVendored(t *testing.T, root, chartPath string) *unstructured.Unstructured {
	t.Helper()
	treefile.WriteFile(t, filepath.Join(root, "rendered/ab/c1/demo/values.yaml"), "message: vendored\n")
	u := slice.Unit{Name: "demo", Kind: slice.UnitHelm, Path: "rendered/ab/c1/demo", Timeout: metav1.Duration{Duration: time.Minute}}
	u.Helm = &slice.HelmRelease{Chart: chartPath, ReleaseName: "demo", Values: "rendered/ab/c1/demo/values.yaml"}
	res, err := render.Unit(context.Background(), root, u, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := find(t, res.Objects, "ConfigMap", "demo")
	wantString(t, cm, "vendored", "data", "message")
	return cm
}
