package render

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

func TestLooksRemote(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"../base", false},
		{"deployment.yaml", false},
		{"github.com.yaml", false},
		{"my-app/overlays/prod", false},
		{"https://github.com/org/repo//dir?ref=v1", true},
		{"HTTP://example.com/x.yaml", true},
		{"git::https://example.com/repo.git", true},
		{"ssh://git@example.com/repo.git", true},
		{"file:///etc", true},
		{"git@github.com:org/repo.git", true},
		{"github.com/org/repo", true},
		{"GitHub.com:org/repo", true},
	}
	for _, tc := range tests {
		if got := looksRemote(tc.in); got != tc.want {
			t.Errorf("looksRemote(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestCheckRel(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{"apps/x", "apps/x", nil},
		{"apps/../x/", "x", nil},
		{"./a//b", "a/b", nil},
		{"..", "", ErrPathEscape},
		{"a/../../b", "", ErrPathEscape},
		{"/etc", "", ErrPathEscape},
	}
	for _, tc := range tests {
		got, err := checkRel(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("checkRel(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestResolve covers the resolver directly: links inside are followed,
// escapes are classified, loops end.
func TestResolve(t *testing.T) {
	root := writeTree(t, map[string]string{"a/file": "x", "b/c/file": "y"})
	symlink(t, "../b/c", filepath.Join(root, "a/link"))      // dir link inside
	symlink(t, "link/file", filepath.Join(root, "a/chain"))  // link through a link
	symlink(t, "../../..", filepath.Join(root, "b/c/up"))    // escapes
	symlink(t, "self", filepath.Join(root, "a/self"))        // loop
	symlink(t, root+"/a/file", filepath.Join(root, "a/abs")) // absolute, inside
	f, err := openConfined(context.Background(), root, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tests := []struct {
		in, want string
		err      error
	}{
		{"a/file", "a/file", nil},
		{"a/link/file", "b/c/file", nil},
		{"a/chain", "b/c/file", nil},
		{"a/abs", "a/file", nil},
		{"a/link/up/etc", "", ErrSymlinkEscape},
		{"a/missing", "", fs.ErrNotExist},
	}
	for _, tc := range tests {
		got, err := f.resolve(tc.in)
		if got != tc.want || (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("resolve(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	if _, err := f.resolve("a/self"); err == nil {
		t.Error("a symlink loop resolved")
	}
	// The same checks hold for the kustomize entry points.
	if _, err := f.ReadFile(filepath.Join(root, "a/link/up/etc/passwd")); !errors.Is(err, ErrSymlinkEscape) {
		t.Errorf("ReadFile through an escaping link: %v", err)
	}
	if _, _, err := f.CleanedAbs(filepath.Join(root, "../outside")); !errors.Is(err, ErrPathEscape) {
		t.Errorf("CleanedAbs outside: %v", err)
	}
	if f.Exists(filepath.Join(root, "a/link/up")) {
		t.Error("Exists reports an escaping link")
	}
	if !errors.Is(f.Violation(), ErrSymlinkEscape) {
		t.Errorf("first violation = %v", f.Violation())
	}
	if err := f.WriteFile(filepath.Join(root, "a/new"), nil); err == nil {
		t.Error("the render filesystem accepted a write")
	}
}

func TestSymlinkLoopInKustomization(t *testing.T) {
	root := writeTree(t, map[string]string{"app/kustomization.yaml": "resources: [loop]\n"})
	symlink(t, "loop", filepath.Join(root, "app/loop"))
	_, err := Unit(context.Background(), root, unitAt("app", slice.UnitKustomize, "app"), Options{})
	if !errors.Is(err, ErrKustomize) || !errors.Is(err, errLoop) {
		t.Fatalf("err = %v, want ErrKustomize for a symlink loop", err)
	}
}

// TestPackagedChart renders a chart committed as a .tgz.
func TestPackagedChart(t *testing.T) {
	root := writeTree(t, map[string]string{"app/values.yaml": "replicaCount: 4\n"})
	ch := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "pkg", Version: "0.2.0"},
		Templates: []*chart.File{{Name: "templates/cm.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: packaged\ndata:\n  replicas: {{ .Values.replicaCount | quote }}\n")}},
	}
	if err := os.MkdirAll(filepath.Join(root, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.Save(ch, filepath.Join(root, "charts")); err != nil {
		t.Fatal(err)
	}
	u := unitAt("app", slice.UnitHelm, "app")
	u.Helm = &slice.HelmRelease{Chart: "charts/pkg-0.2.0.tgz", Values: "app/values.yaml"}
	res, err := Unit(context.Background(), root, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantString(t, find(t, res.Objects, "ConfigMap", "packaged"), "4", "data", "replicas")
}

// TestConcurrentHelmRenders: more renders than workers all complete, each
// with its own values.
func TestConcurrentHelmRenders(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			caps := Capabilities{KubeVersion: []string{"v1.28.0", "v1.31.0"}[i%2]}
			res, err := Unit(context.Background(), fixtureRepo, helmUnit("caps", "rendered/ab/member1/caps", "charts/caps/0.1.0", "monitoring"), Options{Capabilities: caps})
			if err != nil {
				errs <- err
				return
			}
			for _, o := range res.Objects {
				if o.GetKind() == "ConfigMap" {
					if v, _, _ := unstructuredString(o.Object, "data", "kubeVersion"); v != caps.KubeVersion {
						errs <- errors.New("render " + v + " answered a request for " + caps.KubeVersion)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[f]
	}
	s, ok := cur.(string)
	return s, ok, nil
}
