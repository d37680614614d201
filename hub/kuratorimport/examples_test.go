package kuratorimport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/plan"
)

// TestKuratorExamples runs every example of Kurator's examples/application
// (testdata/examples, one fixture per upstream file) through what a
// Kurator user does with Flotilla: import, validate, render (vendoring the
// Git sources from a real Git server and the Helm chart from a real chart
// repository, both on loopback) and plan against a base without the
// applications. An example with no Flotilla equivalent must be refused
// naming file, line and field.
func TestKuratorExamples(t *testing.T) {
	cases := []struct {
		name   string
		inputs []string
		// refused is the start of the import error for an example that has
		// no Flotilla equivalent; nothing else is checked then.
		refused string
		// helmRepo is replaced by a loopback chart repository's URL.
		helmRepo string
		// units are the rendered application units per cluster.
		units map[string][]string
		// contains are strings a cluster's rendered objects must hold.
		contains map[string][]string
	}{
		{
			name:   "gitrepo-kustomization-demo",
			inputs: []string{"common", "gitrepo-kustomization-demo.yaml"},
			units: map[string][]string{
				"kurator-member1": {"gitrepo-kustomization-demo-1", "gitrepo-kustomization-demo-2"},
				"kurator-member2": {"gitrepo-kustomization-demo-1", "gitrepo-kustomization-demo-2"},
			},
			// deploy/webapp has no kustomization.yaml: every manifest below
			// it, as Flux deploys it; ./kustomize in namespace default.
			contains: map[string][]string{"kurator-member1": {
				"kind: Namespace\nmetadata:\n  name: webapp\n",
				"kind: RoleBinding", "name: backend", "name: frontend", "kind: HorizontalPodAutoscaler",
				"name: podinfo\n  namespace: default",
			}},
		},
		{
			name:   "cluster-selector-demo",
			inputs: []string{"labelled", "common/fleet.yaml", "cluster-selector-demo.yaml"},
			units: map[string][]string{
				"kurator-member1": {"gitrepo-kustomization-demo-1"},
				"kurator-member2": {"gitrepo-kustomization-demo-2"},
			},
			contains: map[string][]string{
				"kurator-member1": {"name: frontend"},
				"kurator-member2": {"name: podinfo\n  namespace: default"},
			},
		},
		{
			name:    "gitrepo-kustomization-demo-without-fleet",
			inputs:  []string{"common", "gitrepo-kustomization-demo-without-fleet.yaml"},
			refused: "gitrepo-kustomization-demo-without-fleet.yaml:16: spec.syncPolicies[0].destination.fleet",
		},
		{
			name:   "gitrepo-helmrelease-demo",
			inputs: []string{"common", "gitrepo-helmrelease-demo.yaml"},
			units: map[string][]string{
				"kurator-member1": {"gitrepo-helmrelease-demo"},
				"kurator-member2": {"gitrepo-helmrelease-demo"},
			},
			contains: map[string][]string{"kurator-member1": {
				"image: public.ecr.aws/docker/library/redis:7.0.6", "ingressClassName: nginx",
				"--cache-server=tcp://podinfo-redis:6379",
			}},
		},
		{
			name:     "helmrepo-helmrelease-demo",
			inputs:   []string{"common", "helmrepo-helmrelease-demo.yaml"},
			helmRepo: "https://stefanprodan.github.io/podinfo",
			units: map[string][]string{
				"kurator-member1": {"helmrepo-helmrelease-demo"},
				"kurator-member2": {"helmrepo-helmrelease-demo"},
			},
			contains: map[string][]string{"kurator-member2": {
				"image: public.ecr.aws/docker/library/redis:7.0.6", "ingressClassName: nginx",
				"helm.sh/chart: podinfo-6.9.2",
			}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var paths []string
			for _, in := range tc.inputs {
				paths = append(paths, filepath.Join("testdata", "examples", in))
			}
			files, order, err := ReadInputs(paths)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(files, order)
			if tc.refused != "" {
				var list fleet.ErrorList
				if !errors.As(err, &list) || len(list) == 0 {
					t.Fatalf("import error = %v, want a fleet.ErrorList starting %q", err, tc.refused)
				}
				if got := list[0].Error(); !strings.HasPrefix(got, filepath.Join("testdata", "examples", tc.refused)) {
					t.Errorf("import error %q does not start with %q", got, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("import: %v", err)
			}
			repo := t.TempDir()
			if err := Write(repo, res, false); err != nil {
				t.Fatal(err)
			}
			// Kurator's clusters carry no Kubernetes version: podinfo's
			// kubeVersion constraint (>=1.23) meets render.DefaultKubeVersion.

			// flotilla validate.
			loaded, err := fleet.Load(ctx, repo)
			if err != nil {
				t.Fatalf("validate: %v", err)
			}
			if _, err := fleetrender.Pipeline(ctx, loaded, fleetrender.PipelineOptions{ValidateOnly: true}); err != nil {
				t.Fatalf("validate: %v", err)
			}

			// The plan's base: the clusters and fleets, no application yet.
			apps := filepath.Join(repo, "apps")
			aside := filepath.Join(t.TempDir(), "apps")
			if err := os.Rename(apps, aside); err != nil {
				t.Fatal(err)
			}
			gitIn(t, repo, "init", "-q", "-b", "main")
			gitIn(t, repo, "add", "-A")
			gitIn(t, repo, "commit", "-q", "-m", "base")
			if err := os.Rename(aside, apps); err != nil {
				t.Fatal(err)
			}

			// flotilla render, then every unit rendered as the agent does.
			upstreamGit(t, repo)
			if tc.helmRepo != "" {
				serveCharts(t, repo, tc.helmRepo, filepath.Join("testdata", "vendor", "charts"))
			}
			units, text, err := renderAll(ctx, repo, fleetrender.PipelineOptions{})
			if err != nil {
				t.Fatalf("render: %v", err)
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

			// flotilla plan --base main, the working tree as head.
			p, err := plan.Compute(ctx, plan.Options{RepoDir: repo, Base: "main", HelmInProcess: true, TempDir: t.TempDir()})
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			if p.Failed {
				t.Errorf("plan failed: %+v", p.Clusters)
			}
			added := map[string][]string{}
			for _, c := range p.Clusters {
				for _, u := range c.Units {
					if u.Error != "" {
						t.Errorf("plan: cluster %s unit %s: %s", c.Name, u.Name, u.Error)
					}
					if u.Change == plan.Added && len(u.Objects) > 0 {
						added[c.Name] = append(added[c.Name], u.Name)
					}
				}
			}
			for cluster, want := range tc.units {
				for _, u := range want {
					if !strings.Contains(fmt.Sprint(added[cluster]), u) {
						t.Errorf("plan: cluster %s does not add unit %s with objects (added: %v)", cluster, u, added[cluster])
					}
				}
			}
		})
	}
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
