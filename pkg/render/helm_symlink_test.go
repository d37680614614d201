package render

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// linkedChart is a chart whose directories are reached by more than one
// path, as in the upstream Volcano chart (jobflow's crd/v1 -> bases): the
// templates read the same files under both names.
var linkedChart = map[string]string{
	"chart/Chart.yaml":       "apiVersion: v2\nname: linked\nversion: 0.1.0\ndependencies:\n- name: sub\n  version: 0.1.0\n",
	"chart/values.yaml":      "{}\n",
	"chart/crd/bases/a.yaml": "kind: A\n",
	"chart/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: linked
data:
  bases: {{ .Files.Get "crd/bases/a.yaml" | quote }}
  v1: {{ .Files.Get "crd/v1/a.yaml" | quote }}
  shared: {{ .Files.Get "shared/s.txt" | quote }}
`,
	"chart/charts/sub/Chart.yaml":        "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
	"chart/charts/sub/crd/bases/f.yaml":  "kind: Flow\n",
	"chart/charts/sub/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sub\ndata:\n  v1: {{ .Files.Get \"crd/v1/f.yaml\" | quote }}\n",
	// Outside the chart but inside the repository.
	"lib/shared/s.txt": "shared\n",
	"unit/.keep":       "",
}

func linkedChartLinks(t *testing.T, root string) {
	symlink(t, "bases", filepath.Join(root, "chart/crd/v1"))
	symlink(t, "bases", filepath.Join(root, "chart/charts/sub/crd/v1"))
	symlink(t, "../lib/shared", filepath.Join(root, "chart/shared"))
}

// TestLoadChartLinkedDirsAsHelm: loadChart reads exactly the files Helm's
// own directory loader reads, a directory linked twice under both paths,
// and the templates see them under both names.
func TestLoadChartLinkedDirsAsHelm(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		links func(t *testing.T, root string)
	}{
		{name: "linked twice", files: linkedChart, links: linkedChartLinks},
		{
			name: "linked directory with a nested link",
			files: map[string]string{
				"chart/Chart.yaml":      "apiVersion: v2\nname: nested\nversion: 0.1.0\n",
				"chart/data/x/one.txt":  "1\n",
				"chart/data/y/two.txt":  "2\n",
				"chart/templates/.keep": "",
			},
			links: func(t *testing.T, root string) {
				symlink(t, "../y", filepath.Join(root, "chart/data/x/y"))
				symlink(t, "data/x", filepath.Join(root, "chart/alias"))
				symlink(t, "x/one.txt", filepath.Join(root, "chart/data/one.txt"))
			},
		},
		{
			// An ignored link to an ancestor is never walked, by Helm or by us.
			name: "ignored link to an ancestor",
			files: map[string]string{
				"chart/Chart.yaml":    "apiVersion: v2\nname: ignored\nversion: 0.1.0\n",
				"chart/.helmignore":   "templates/up\n",
				"chart/templates/.k":  "",
				"chart/files/one.txt": "1\n",
			},
			links: func(t *testing.T, root string) {
				symlink(t, "..", filepath.Join(root, "chart/templates/up"))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, tc.files)
			tc.links(t, root)

			f, err := openConfined(context.Background(), root, DefaultMaxFileSize)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var req helmRequest
			if err := loadChart(f, "chart", Limits{}.withDefaults(), &req); err != nil {
				t.Fatalf("loadChart: %v", err)
			}
			var got []string
			for _, hf := range req.Files {
				got = append(got, hf.Name+"="+string(hf.Data))
			}

			// The oracle: Helm's loader on the same tree; Raw holds every
			// file it read, subcharts' included.
			ch, err := loader.LoadDir(filepath.Join(root, "chart"))
			if err != nil {
				t.Fatalf("helm LoadDir: %v", err)
			}
			var want []string
			for _, rf := range ch.Raw {
				want = append(want, rf.Name+"="+string(rf.Data))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("chart files differ from Helm's loader\n got: %q\nwant: %q", got, want)
			}
		})
	}
}

// TestHelmUnitLinkedDirs: a chart that reads a linked directory through
// .Files.Get under both names renders, subchart included.
func TestHelmUnitLinkedDirs(t *testing.T) {
	root := writeTree(t, linkedChart)
	linkedChartLinks(t, root)
	u := unitAt("linked", slice.UnitHelm, "unit")
	u.Namespace = "ns"
	u.Helm = &slice.HelmRelease{Chart: "chart", ReleaseName: "linked"}
	res, err := Unit(context.Background(), root, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := find(t, res.Objects, "ConfigMap", "linked")
	wantString(t, cm, "kind: A\n", "data", "bases")
	wantString(t, cm, "kind: A\n", "data", "v1")
	wantString(t, cm, "shared\n", "data", "shared")
	wantString(t, find(t, res.Objects, "ConfigMap", "sub"), "kind: Flow\n", "data", "v1")
}

// TestLoadChartRefusedLinks: a directory that is its own ancestor and a
// link out of the repository are refused, naming the link.
func TestLoadChartRefusedLinks(t *testing.T) {
	base := map[string]string{
		"chart/Chart.yaml":         "apiVersion: v2\nname: bad\nversion: 0.1.0\n",
		"chart/templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		"chart/files/a/keep.txt":   "a\n",
		"chart/files/b/keep.txt":   "b\n",
		"chart/files/c/d/keep.txt": "d\n",
		"unit/.keep":               "",
	}
	tests := []struct {
		name     string
		links    map[string]string // link → target
		class    error
		wantFile string
	}{
		{
			name:     "link to the chart root",
			links:    map[string]string{"chart/templates/up": ".."},
			class:    ErrHelm,
			wantFile: "chart/templates/up",
		},
		{
			name:     "link to its parent",
			links:    map[string]string{"chart/files/c/d/back": ".."},
			class:    ErrHelm,
			wantFile: "chart/files/c/d/back",
		},
		{
			// a/to-b -> b, b/to-a -> a: the loop closes at the second link.
			name:     "two links forming a loop",
			links:    map[string]string{"chart/files/a/to-b": "../b", "chart/files/b/to-a": "../a"},
			class:    ErrHelm,
			wantFile: "chart/files/a/to-b/to-a",
		},
		{
			name:     "link to the repository root",
			links:    map[string]string{"chart/files/root": "../.."},
			class:    ErrHelm,
			wantFile: "chart/files/root/chart",
		},
		{
			name:     "relative link out of the repository",
			links:    map[string]string{"chart/files/out": "../../../outside"},
			class:    ErrSymlinkEscape,
			wantFile: "chart/files/out",
		},
		{
			name:     "absolute link out of the repository",
			links:    map[string]string{"chart/files/etc": "/etc"},
			class:    ErrSymlinkEscape,
			wantFile: "chart/files/etc",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, base)
			treefile.WriteFile(t, filepath.Join(filepath.Dir(root), "outside/secret.txt"), "s\n")
			for link, target := range tc.links {
				symlink(t, target, filepath.Join(root, filepath.FromSlash(link)))
			}
			u := unitAt("bad", slice.UnitHelm, "unit")
			u.Helm = &slice.HelmRelease{Chart: "chart", ReleaseName: "bad"}
			_, err := Unit(context.Background(), root, u, Options{})
			if !errors.Is(err, tc.class) {
				t.Fatalf("err = %v, want %v", err, tc.class)
			}
			if !strings.Contains(err.Error(), tc.wantFile+":") {
				t.Errorf("err = %v, want it to name %s", err, tc.wantFile)
			}
		})
	}
}

// TestLoadChartLinkedDirsBounded: links that multiply directories without
// adding files are bounded like files.
func TestLoadChartLinkedDirsBounded(t *testing.T) {
	files := map[string]string{"chart/Chart.yaml": "apiVersion: v2\nname: wide\nversion: 0.1.0\n"}
	const levels = 16 // 2^16 paths, more than maxChartFiles
	root := writeTree(t, files)
	for i := range levels {
		for _, n := range []string{"a", "b"} {
			symlink(t, fmt.Sprintf("../d%d", i+1), filepath.Join(root, fmt.Sprintf("chart/d%d/%s", i, n)))
		}
	}
	treefile.WriteFile(t, filepath.Join(root, fmt.Sprintf("chart/d%d/.keep", levels)), "")
	f, err := openConfined(context.Background(), root, DefaultMaxFileSize)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var req helmRequest
	err = loadChart(f, "chart", Limits{}.withDefaults(), &req)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "directories") {
		t.Fatalf("err = %v, want ErrTooLarge for directories", err)
	}
}
