package render

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// hookOrderChart has pre-install hooks whose order by weight then kind
// then name (or by file) differs from Helm's weight then name then kind:
// equal weights with names against kind order, one name shared by two
// kinds, a kind Helm does not know, and weights that are not integers.
var hookOrderChart = map[string]string{
	"chart/Chart.yaml": "apiVersion: v2\nname: hooks\nversion: 0.1.0\n",
	"chart/templates/hooks.yaml": strings.Join([]string{
		hookDoc("v1", "ServiceAccount", "zz-account", "0"),
		hookDoc("batch/v1", "Job", "aa-migrate", "0"),
		hookDoc("v1", "ConfigMap", "mm-shared", "0"),
		hookDoc("v1", "Secret", "mm-shared", "0"),
		hookDoc("batch/v1", "Job", "mm-shared", "0"),
		hookDoc("example.com/v1", "Widget", "bb-widget", "0"),
		hookDoc("example.com/v1", "Gadget", "bb-widget", "0"),
		hookDoc("v1", "Pod", "cc-pod", "junk"),
		hookDoc("batch/v1", "Job", "zz-first", "-3"),
		hookDoc("v1", "ConfigMap", "aa-last", "7"),
	}, "---\n"),
	// A second file: Helm reads files by name, so file order is not the
	// order either.
	"chart/templates/a-more.yaml": hookDoc("v1", "ServiceAccount", "ab-account", "0"),
	"app/values.yaml":             "{}\n",
}

func hookDoc(apiVersion, kind, name, weight string) string {
	return fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n  annotations:\n    helm.sh/hook: pre-install\n    helm.sh/hook-weight: %q\n", apiVersion, kind, name, weight)
}

// TestHookOrderIsHelms: a helm unit's hooks of one event are in the order
// Helm's own install action creates them, with Helm as the oracle.
func TestHookOrderIsHelms(t *testing.T) {
	root := writeTree(t, hookOrderChart)
	u := unitAt("hooks", slice.UnitHelm, "app")
	u.Namespace = "ns"
	u.Helm = &slice.HelmRelease{Chart: "chart", ReleaseName: "hooks", Values: "app/values.yaml"}
	res, err := Unit(context.Background(), root, u, Options{HelmInProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range res.Hooks {
		got = append(got, h.Object.GetKind()+" "+h.Object.GetName())
	}
	want := helmInstallHookOrder(t, root+"/chart", "hooks", "ns")
	if !slices.Equal(got, want) {
		t.Errorf("hooks in order\n  %s\nHelm's install runs them\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// helmInstallHookOrder installs the chart with Helm's install action
// against a client that records what it creates, and returns the
// pre-install hooks as "Kind name" in the order Helm created them.
func helmInstallHookOrder(t *testing.T, chartDir, release, namespace string) []string {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingKube{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard, LogOutput: io.Discard}}
	cfg := &action.Configuration{
		KubeClient:   rec,
		Releases:     storage.Init(driver.NewMemory()),
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace = release, namespace
	if _, err := inst.Run(ch, map[string]any{}); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	return rec.created
}

// recordingKube is Helm's printing fake client, except that Build parses
// the manifest it is given (the fake returns nothing) and Create records
// what it is asked to create, in order.
type recordingKube struct {
	kubefake.PrintingKubeClient
	created []string
}

func (r *recordingKube) Build(in io.Reader, _ bool) (kube.ResourceList, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, err
	}
	var list kube.ResourceList
	for doc := range strings.SplitSeq(string(data), "\n---") {
		if len(bytes.TrimSpace([]byte(doc))) == 0 {
			continue
		}
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			return nil, err
		}
		if o.Object == nil {
			continue
		}
		list = append(list, &resource.Info{Name: o.GetName(), Namespace: o.GetNamespace(), Object: o})
	}
	return list, nil
}

func (r *recordingKube) Create(resources kube.ResourceList) (*kube.Result, error) {
	for _, info := range resources {
		r.created = append(r.created, info.Object.GetObjectKind().GroupVersionKind().Kind+" "+info.Name)
	}
	return &kube.Result{Created: resources}, nil
}
