package render

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

const (
	deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n"
	service    = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n"
)

func configMapNamed(name string) string {
	return strings.ReplaceAll(configMap, "name: ok", "name: "+name)
}

// TestGeneratedKustomizationMatchesFlux renders source directories without
// (and with) a kustomization file and compares, with Flux's own generator
// and build (github.com/fluxcd/pkg/kustomize, as kustomize-controller runs
// them) as the oracle: the generated kustomization's resources, the built
// objects, and whether the build fails at all.
func TestGeneratedKustomizationMatchesFlux(t *testing.T) {
	cases := []struct {
		name string
		// files are below the source directory.
		files map[string]string
		// links are symlinks below the source directory → their target.
		links map[string]string
		// wantErr: Flux refuses the tree, and so must the render.
		wantErr bool
	}{
		{
			name: "nested plain manifests, nested kustomizations, other files ignored",
			files: map[string]string{
				"deployment.yaml":           deployment,
				"service.yml":               service,
				"multi.yaml":                configMapNamed("one") + "---\n" + configMapNamed("two"),
				"README.md":                 "# not a manifest\n",
				"config.json":               `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"json"}}`,
				"UPPER.YAML":                configMapNamed("upper"),
				"notes.txt":                 "apiVersion: v1\n",
				"sub/cm.yaml":               configMapNamed("sub"),
				"sub/deeper/cm.yml":         configMapNamed("deeper"),
				".hidden/cm.yaml":           configMapNamed("hidden"),
				"nested/kustomization.yaml": kustomization("resources: [a.yaml]", "namePrefix: nested-"),
				"nested/a.yaml":             configMapNamed("a"),
				"nested/unlisted.yaml":      configMapNamed("unlisted"),
				"sub/alt/Kustomization":     kustomization("resources: [b.yaml]"),
				"sub/alt/b.yaml":            configMapNamed("b"),
				"sub/alt/not-k8s.yaml":      "replicaCount: 3\n",
			},
		},
		{
			name:  "nothing to list",
			files: map[string]string{"README.md": "# docs only\n", "chart.tgz": "x"},
		},
		{
			name:  "empty and comment-only YAML files",
			files: map[string]string{"empty.yaml": "", "comments.yaml": "# nothing here\n", "cm.yaml": configMap},
		},
		{
			name:  "a List is expanded",
			files: map[string]string{"list.yaml": "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(configMapNamed("item"), "\n"), "\n", "\n  ") + "\n"},
		},
		{
			name:  "symlinked directory is not followed",
			files: map[string]string{"real/cm.yaml": configMap},
			links: map[string]string{"link": "real"},
		},
		{
			name:    "YAML that is not Kubernetes",
			files:   map[string]string{"values.yaml": "replicaCount: 1\n", "cm.yaml": configMap},
			wantErr: true,
		},
		{
			name: "a kustomization of its own is used as it is",
			files: map[string]string{
				"kustomization.yaml": kustomization("resources: [a.yaml]"),
				"a.yaml":             configMapNamed("a"),
				"b.yaml":             configMapNamed("b"),
			},
		},
		{
			name: "a kustomization listing a directory without one fails, as in kustomize",
			files: map[string]string{
				"kustomization.yaml": kustomization("resources: [plain]"),
				"plain/cm.yaml":      configMap,
			},
			wantErr: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"unit/kustomization.yaml": kustomization("resources: [../src]")}
			for p, c := range tc.files {
				files["src/"+p] = c
			}
			root := writeTree(t, files)
			for link, target := range tc.links {
				symlink(t, target, filepath.Join(root, "src", filepath.FromSlash(link)))
			}
			fluxRoot := t.TempDir()
			if err := os.CopyFS(fluxRoot, os.DirFS(root)); err != nil {
				t.Fatal(err)
			}
			fluxSrc := filepath.Join(fluxRoot, "src")

			want, wantErr := fluxObjects(fluxRoot, fluxSrc)
			if (wantErr != nil) != tc.wantErr {
				t.Fatalf("the oracle: Flux's build error = %v, the case says wantErr %v", wantErr, tc.wantErr)
			}
			res, err := Unit(context.Background(), root, unitAt("u", slice.UnitKustomize, "unit"), Options{})
			if tc.wantErr {
				if err == nil || !errors.Is(err, ErrKustomize) {
					t.Fatalf("render error = %v, want ErrKustomize (Flux: %v)", err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if diff := cmp.Diff(want, canonical(t, res.Objects)); diff != "" {
				t.Errorf("objects differ from Flux's build (-flux +render):\n%s", diff)
			}

			// The generated kustomization itself, where Flux generates one.
			fluxK, _, action, err := fluxkustomize.NewGenerator("", unstructured.Unstructured{}).GenerateManifest(fluxSrc)
			if err != nil {
				t.Fatal(err)
			}
			if action != fluxkustomize.CreatedAction {
				return
			}
			f, err := openConfined(context.Background(), root, DefaultMaxFileSize)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := generateKustomization(f, "src"); err != nil {
				t.Fatal(err)
			}
			var got, wantK types.Kustomization
			if err := yaml.Unmarshal(f.overlay["src/kustomization.yaml"], &got); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(fluxK, &wantK); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantK, got); diff != "" {
				t.Errorf("generated kustomization differs from Flux's (-flux +render):\n%s", diff)
			}
		})
	}
}

// fluxObjects is what kustomize-controller deploys from dir: Flux's
// generator writes a kustomization where there is none, then Flux builds.
func fluxObjects(root, dir string) ([]string, error) {
	if _, err := fluxkustomize.NewGenerator(root, unstructured.Unstructured{}).WriteFile(dir); err != nil {
		return nil, err
	}
	m, err := fluxkustomize.SecureBuild(root, dir, false)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		out = append(out, string(y))
	}
	slices.Sort(out)
	return out, nil
}

// canonical is objs as sorted YAML documents, comparable with fluxObjects.
func canonical(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(y))
	}
	slices.Sort(out)
	return out
}

// TestGeneratedKustomizationBounds: the scan that generates a kustomization
// reads through the confined filesystem, so escapes and limits fail the
// render as they do anywhere else, naming the file.
func TestGeneratedKustomizationBounds(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		links map[string]string
		opts  Options
		class error
		msg   string
	}{
		{
			name:  "symlinked manifest outside the repo",
			files: map[string]string{"src/cm.yaml": configMap},
			links: map[string]string{"src/secret.yaml": "../../outside.yaml"},
			class: ErrSymlinkEscape,
			msg:   "src/secret.yaml",
		},
		{
			name:  "file over the size limit",
			files: map[string]string{"src/big.yaml": configMap + "data:\n  k: " + strings.Repeat("x", 4096) + "\n"},
			opts:  Options{Limits: Limits{MaxFileSize: 1024}},
			class: ErrTooLarge,
			msg:   "src/big.yaml",
		},
		{
			name:  "alias bomb",
			files: map[string]string{"src/bomb.yaml": billionLaughs},
			class: ErrYAMLBomb,
			msg:   "src/bomb.yaml",
		},
		{
			name:  "YAML that is not Kubernetes names the file",
			files: map[string]string{"src/sub/values.yaml": "replicaCount: 1\n"},
			class: ErrKustomize,
			msg:   "src/sub/values.yaml",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.files["unit/kustomization.yaml"] = kustomization("resources: [../src]")
			root := writeTree(t, tc.files)
			treefile.WriteFile(t, filepath.Join(root, "..", "outside.yaml"), configMapNamed("outside"))
			for link, target := range tc.links {
				symlink(t, target, filepath.Join(root, filepath.FromSlash(link)))
			}
			_, err := Unit(context.Background(), root, unitAt("u", slice.UnitKustomize, "unit"), tc.opts)
			if !errors.Is(err, tc.class) {
				t.Fatalf("error = %v, want %v", err, tc.class)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not name %q", err, tc.msg)
			}
		})
	}
}
