package kuratorimport

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor"
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor/ocitest"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/chartrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/golden"
	"github.com/flotilla-gitops/flotilla/test/ociregistry"
)

// TestGolden converts each Kurator-shaped fixture, compares the files and
// warnings with testdata/golden/<case>.txt, then loads and validates the
// result with the fleet loader and compile pipeline flotilla validate uses,
// and renders it: Git sources are vendored by the render from a real Git
// server on loopback serving the fixture's trees; Helm charts come from a
// real chart repository on loopback.
func TestGolden(t *testing.T) {
	cases := []struct {
		name string
		// git serves the Kurator fixtures' Git repositories (upstreamGit).
		git bool
		// chartRepo is replaced by a loopback chart repository's URL.
		chartRepo string
		// ociRepo is replaced by a repository of the suite's OCI registry
		// (TLS, basic auth) holding the fixture charts.
		ociRepo string
		// units are the rendered applications per cluster.
		units map[string][]string
		// contains are strings a cluster's rendered files must hold.
		contains map[string][]string
	}{
		{
			name:  "fleet-attached",
			units: map[string][]string{"aws-edge": nil, "kurator-member1": nil, "kurator-member2": nil},
		},
		{
			name: "git-kustomize",
			git:  true,
			units: map[string][]string{
				"kurator-member1": {"gitrepo-kustomization-demo-2", "gitrepo-kustomization-demo-webapp"},
				"kurator-member2": {"gitrepo-kustomization-demo-2", "gitrepo-kustomization-demo-webapp"},
			},
			contains: map[string][]string{"kurator-member1": {"image: ghcr.io/stefanprodan/podinfo:6.5.0", "replicas: 1", "namespace: podinfo"}},
		},
		{
			name:      "helm-values",
			chartRepo: "https://charts.example.com/flotilla",
			units:     map[string][]string{"kurator-member1": {"cache"}, "kurator-member2": {"cache"}},
			contains:  map[string][]string{"kurator-member1": {"128mb"}, "kurator-member2": {"256mb"}},
		},
		{
			name:     "helm-oci",
			ociRepo:  "oci://registry.example.com/charts",
			units:    map[string][]string{"kurator-member1": {"cache-oci"}, "kurator-member2": {"cache-oci"}},
			contains: map[string][]string{"kurator-member1": {"64mb"}, "kurator-member2": {"64mb"}},
		},
		{
			name: "cluster-selector",
			git:  true,
			units: map[string][]string{
				"test-1": {"default-demo"}, "dev-1": {"default-demo"}, "dev-2": {"default-demo"},
				"dev-outside": nil, "team-b-edge": {"team-b-demo"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			files, order, err := ReadInputs([]string{filepath.Join("testdata", tc.name)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(files, order)
			if err != nil {
				t.Fatalf("convert: %v", err)
			}
			repo := t.TempDir()
			if err := Write(repo, res, false); err != nil {
				t.Fatal(err)
			}
			loaded, err := fleet.Load(ctx, repo)
			if err != nil {
				t.Fatalf("imported repo does not load: %v", err)
			}
			out, err := fleetrender.Pipeline(ctx, loaded, fleetrender.PipelineOptions{ValidateOnly: true})
			if err != nil {
				t.Fatalf("imported repo does not validate: %v", err)
			}
			golden.Assert(t, filepath.Join("testdata", "golden", tc.name+".txt"), describe(res, append(loaded.Warnings, out.Warnings...)))

			if tc.git {
				upstreamGit(t, repo)
			}
			if tc.chartRepo != "" {
				serveCharts(t, repo, tc.chartRepo, "../../test/fixtures/charts")
			}
			var opts fleetrender.PipelineOptions
			if tc.ociRepo != "" {
				opts.Charts = registryCharts(t, repo, tc.ociRepo, "../../test/fixtures/charts/redis-cache")
			}
			units, text, err := renderAll(ctx, repo, opts)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if locks, _ := filepath.Glob(filepath.Join(repo, "sources", "*.lock.yaml")); tc.git && len(locks) != 2 {
				t.Errorf("render vendored %d Git sources, want 2: %v", len(locks), locks)
			}
			if fmt.Sprint(units) != fmt.Sprint(tc.units) {
				t.Errorf("rendered units = %v, want %v", units, tc.units)
			}
			for cluster, subs := range tc.contains {
				for _, s := range subs {
					if !strings.Contains(text[cluster], s) {
						t.Errorf("cluster %s's rendered objects lack %q:\n%s", cluster, s, text[cluster])
					}
				}
			}
		})
	}
}

// describe is the golden text of a conversion: every file, then every
// warning of the import and of validating its result.
func describe(res *Result, validate fleet.ErrorList) string {
	var b strings.Builder
	for _, p := range res.Paths() {
		fmt.Fprintf(&b, "=== %s\n%s", p, res.Files[p])
	}
	b.WriteString("=== import warnings\n")
	for _, w := range res.Warnings {
		fmt.Fprintf(&b, "%s\n", w)
	}
	b.WriteString("=== validate warnings\n")
	for _, w := range validate {
		fmt.Fprintf(&b, "%s\n", w)
	}
	return b.String()
}

// renderAll compiles the repo into rendered/ as flotilla render does and
// renders every application unit with render.Unit, the function the agent
// applies with, with the cluster's spec.kubernetesVersion as Helm's (as
// plan does). It returns each cluster's application units and its objects
// as YAML.
func renderAll(ctx context.Context, repo string, opts fleetrender.PipelineOptions) (map[string][]string, map[string]string, error) {
	loaded, err := fleet.Load(ctx, repo)
	if err != nil {
		return nil, nil, err
	}
	out, err := fleetrender.Pipeline(ctx, loaded, opts)
	if err != nil {
		return nil, nil, err
	}
	if _, err := fleetrender.Write(ctx, repo, out, fleetrender.WriteOptions{}); err != nil {
		return nil, nil, err
	}
	units, text := map[string][]string{}, map[string]string{}
	for _, co := range out.Clusters {
		cluster := co.Slice.Cluster
		units[cluster] = nil
		for _, u := range co.Slice.Units {
			if u.Kind != slice.UnitKustomize && u.Kind != slice.UnitHelm && u.Kind != slice.UnitManifests {
				continue
			}
			units[cluster] = append(units[cluster], u.Name)
			opts := render.Options{HelmInProcess: true}
			if cl := loaded.Cluster(cluster); cl != nil {
				opts.Capabilities.KubeVersion = cl.Spec.KubernetesVersion
			}
			res, err := render.Unit(ctx, repo, u, opts)
			if err != nil {
				return nil, nil, fmt.Errorf("cluster %s unit %s: %w", cluster, u.Name, err)
			}
			for _, o := range res.Objects {
				data, err := yaml.Marshal(o.Object)
				if err != nil {
					return nil, nil, err
				}
				text[cluster] += string(data) + "---\n"
			}
		}
		sort.Strings(units[cluster])
	}
	return units, text, nil
}

// upstreamGit serves the Git repositories the fixtures name on a real Git
// server — podinfo (branch master, tag 6.5.0) with testdata/vendor/webapp
// at deploy/webapp (no kustomization.yaml, as in podinfo),
// testdata/vendor/kustomize at kustomize and testdata/vendor/charts/podinfo
// at charts/podinfo, and
// team-b/demo with testdata/vendor/webapp at deploy — and points the
// imported applications at it (the fixture's placeholder commit becomes
// team-b/demo's real one). The render then vendors them into sources/.
func upstreamGit(t *testing.T, repo string) {
	t.Helper()
	cfg := gitserver.ForgeConfig()
	cfg.AnonymousRead = true
	srv := gitserver.Start(t, cfg)
	podinfo := t.TempDir()
	copyTree(t, filepath.Join("testdata", "vendor", "webapp"), filepath.Join(podinfo, "deploy", "webapp"))
	copyTree(t, filepath.Join("testdata", "vendor", "kustomize"), filepath.Join(podinfo, "kustomize"))
	copyTree(t, filepath.Join("testdata", "vendor", "charts", "podinfo"), filepath.Join(podinfo, "charts", "podinfo"))
	srv.MustCreateRepo(t, "podinfo", podinfo)
	head := srv.Head("podinfo", "main")
	for _, ref := range []string{"refs/heads/master", "refs/tags/6.5.0"} {
		cmd := exec.Command("git", "--git-dir="+srv.RepoPath("podinfo"), "update-ref", ref, head)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	demo := t.TempDir()
	copyTree(t, filepath.Join("testdata", "vendor", "webapp"), filepath.Join(demo, "deploy"))
	srv.MustCreateRepo(t, "team-b/demo", demo)
	rewriteApps(t, repo, strings.NewReplacer(
		"https://github.com/stefanprodan/podinfo", srv.URL("podinfo"),
		"https://git.example.com/team-b/demo.git", srv.URL("team-b/demo"),
		"0123456789abcdef0123456789abcdef01234567", srv.Head("team-b/demo", "main"),
	))
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// rewriteApps applies r to every imported app.yaml.
func rewriteApps(t *testing.T, repo string, r *strings.Replacer) {
	t.Helper()
	apps, err := filepath.Glob(filepath.Join(repo, "apps", "*", "app.yaml"))
	if err != nil || len(apps) == 0 {
		t.Fatalf("no imported apps: %v", err)
	}
	for _, p := range apps {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(r.Replace(string(data))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// serveCharts serves the charts in dir on loopback and points the imported
// applications at it instead of from.
// registryCharts pushes the chart at dir (versions 0.2.0, 0.3.0 and
// 0.3.1) to the suite's OCI registry, points the imported applications'
// repo from at it, and returns a chart vendor with the registry's
// credentials and CA, as flotilla render --registry-config gives them.
func registryCharts(t *testing.T, repo, from, dir string) fleetrender.ChartVendor {
	t.Helper()
	reg := ociregistry.Start(t)
	if _, err := ocitest.As(reg).PushDir("charts", dir, "0.2.0", "0.3.0", "0.3.1"); err != nil {
		t.Fatal(err)
	}
	config, err := reg.ConfigFile(t.TempDir(), reg.Username, reg.Password)
	if err != nil {
		t.Fatal(err)
	}
	rewriteApps(t, repo, strings.NewReplacer(from, "oci://"+reg.Host+"/charts"))
	return chartvendor.RegistryOptions{ConfigFile: config, CAFile: reg.CAFile}.VendorCharts
}

func serveCharts(t *testing.T, repo, from, dir string) {
	t.Helper()
	charts, err := chartrepo.PackageDirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := chartrepo.Serve(charts, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	rewriteApps(t, repo, strings.NewReplacer(from, srv.URL))
}
