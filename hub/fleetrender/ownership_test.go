package fleetrender

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/sopscli"
)

// appWithFiles is a manifests application whose source holds files.
func appWithFiles(t *testing.T, root, name string, files map[string]string, policies ...fleet.SyncPolicy) *fleet.Application {
	t.Helper()
	a := manifestsApp(t, root, name, policies...)
	dir := filepath.Join(root, "apps", name, "m")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, data := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

const sharedDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shared
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
`

const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gizmos.example.com
spec:
  group: example.com
  names: {kind: Gizmo, plural: gizmos, singular: gizmo}
  scope: Cluster
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

func webappNamespace(labels string) string {
	return "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: webapp\n  labels:\n" + labels
}

func webFleet(labels map[string]string) *fleet.Fleet {
	return &fleet.Fleet{Metadata: fleet.ObjectMeta{Name: "prod"}, Source: fleet.Source{File: "fleets/prod.yaml", Line: 1},
		Spec: fleet.FleetSpec{Clusters: []string{"a", "b"}, Namespaces: []fleet.NamespaceSpec{{Name: "webapp", Labels: labels}}}}
}

func TestOwnershipErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(t *testing.T, root string) *fleet.Repo
		class error // ErrConflict when nil
		want  []string
	}{
		{
			name: "two applications render one Deployment",
			build: func(t *testing.T, root string) *fleet.Repo {
				one := appWithFiles(t, root, "one", map[string]string{"d.yaml": sharedDeployment}, toClusters("a", "b"))
				two := appWithFiles(t, root, "two", map[string]string{"d.yaml": sharedDeployment}, toClusters("b"))
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil), cluster("b", nil)},
					Applications: []*fleet.Application{one, two}}
			},
			want: []string{"apps/two/app.yaml", "spec.source", "Deployment.apps shared/web is rendered by unit one (apps/one/app.yaml) and by unit two (apps/two/app.yaml)", "cluster b"},
		},
		{
			// Gizmo is cluster-scoped (the crds application's CRD says so):
			// the namespaces the applications set do not tell the two apart.
			name: "two applications in other namespaces render one cluster-scoped custom object",
			build: func(t *testing.T, root string) *fleet.Repo {
				crds := appWithFiles(t, root, "crds", map[string]string{"crd.yaml": gizmoCRD}, toClusters("a"))
				one := appWithFiles(t, root, "one", map[string]string{"g.yaml": "apiVersion: example.com/v1\nkind: Gizmo\nmetadata:\n  name: same\n"}, toClusters("a"))
				one.Spec.Namespace = "n1"
				two := appWithFiles(t, root, "two", map[string]string{"g.yaml": "apiVersion: example.com/v1\nkind: Gizmo\nmetadata:\n  name: same\n"}, toClusters("a"))
				two.Spec.Namespace = "n2"
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil)}, Applications: []*fleet.Application{crds, one, two}}
			},
			want: []string{"apps/two/app.yaml", "Gizmo.example.com same is rendered by unit one (apps/one/app.yaml) and by unit two (apps/two/app.yaml)", "cluster a"},
		},
		{
			name: "an object with only generateName",
			build: func(t *testing.T, root string) *fleet.Repo {
				app := appWithFiles(t, root, "web", map[string]string{"job.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n  namespace: web\n"}, toClusters("a"))
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil)}, Applications: []*fleet.Application{app}}
			},
			class: fleet.ErrInvalidValue,
			want:  []string{"apps/web/app.yaml", "spec.source", "apps/web/m/job.yaml", "Job generateName migrate-", "has generateName but no metadata.name", "cluster a"},
		},
		{
			name: "an application's namespace label contradicts the fleet's",
			build: func(t *testing.T, root string) *fleet.Repo {
				app := appWithFiles(t, root, "web", map[string]string{"ns.yaml": webappNamespace("    pod-security.kubernetes.io/enforce: privileged\n")}, toClusters("a"))
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil)}, Applications: []*fleet.Application{app},
					Fleets: []*fleet.Fleet{webFleet(map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})}}
			},
			want: []string{"apps/web/app.yaml", `Namespace webapp: the application sets label pod-security.kubernetes.io/enforce="privileged", fleet prod (fleets/prod.yaml) declares "restricted"`},
		},
		{
			name: "two applications set one namespace label differently",
			build: func(t *testing.T, root string) *fleet.Repo {
				one := appWithFiles(t, root, "one", map[string]string{"ns.yaml": webappNamespace("    team: a\n")}, toClusters("a"))
				two := appWithFiles(t, root, "two", map[string]string{"ns.yaml": webappNamespace("    team: b\n")}, toClusters("a"))
				return &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil)}, Applications: []*fleet.Application{one, two},
					Fleets: []*fleet.Fleet{webFleet(nil)}}
			},
			want: []string{"apps/two/app.yaml", `the application sets label team="b", application one (apps/one/app.yaml) sets "a"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			_, err := Compile(context.Background(), tt.build(t, root), Options{})
			class := tt.class
			if class == nil {
				class = ErrConflict
			}
			if !errors.Is(err, class) {
				t.Fatalf("err = %v, want %v", err, class)
			}
			var list fleet.ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("want one error, got %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(list[0].Error(), w) {
					t.Errorf("error %q lacks %q", list[0].Error(), w)
				}
			}
			leftovers, _ := filepath.Glob(filepath.Join(root, ".flotilla-objects-*"))
			if len(leftovers) > 0 {
				t.Errorf("scratch directories left behind: %v", leftovers)
			}
		})
	}
}

// An application shipping a Namespace its fleet declares: the namespaces
// unit owns it with the application's labels merged, and the application's
// unit, rendered as the agent renders it, no longer contains it.
func TestOwnershipFleetNamespace(t *testing.T) {
	root := t.TempDir()
	web := appWithFiles(t, root, "web", map[string]string{
		"ns.yaml": webappNamespace("    istio-injection: enabled\n    pod-security.kubernetes.io/enforce: restricted\n"),
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: webapp\n",
	}, toClusters("a", "b"))
	other := appWithFiles(t, root, "other", map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: webapp\n"}, toClusters("a", "b"))
	repo := &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil), cluster("b", nil)},
		Applications: []*fleet.Application{web, other},
		Fleets:       []*fleet.Fleet{webFleet(map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "env": "prod"})}}
	out, err := Compile(context.Background(), repo, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Notes) != 1 || !strings.Contains(out.Notes[0], "application web ships Namespace webapp, which fleet prod declares") ||
		!strings.Contains(out.Notes[0], "clusters a, b") {
		t.Errorf("notes = %q", out.Notes)
	}
	if _, err := Write(context.Background(), root, out, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := slice.Read(root, "a")
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string]string{} // object → unit
	for _, u := range s.Units {
		if err := slice.CheckHash(slice.NewTreeHasher(root), u); err != nil {
			t.Errorf("unit %s: %v", u.Name, err)
		}
		res, err := render.Unit(context.Background(), root, u, render.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			id := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
			if prev, dup := objects[id]; dup {
				t.Errorf("%s rendered by %s and %s", id, prev, u.Name)
			}
			objects[id] = u.Name
			if o.GetKind() == "Namespace" {
				want := map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "env": "prod", "istio-injection": "enabled"}
				for k, v := range want {
					if got := o.GetLabels()[k]; got != v {
						t.Errorf("Namespace label %s = %q, want %q", k, got, v)
					}
				}
			}
		}
	}
	want := map[string]string{"Namespace//webapp": slice.UnitNamespaces, "ConfigMap/webapp/web": "web", "ConfigMap/webapp/other": "other"}
	for id, unit := range want {
		if objects[id] != unit {
			t.Errorf("%s is rendered by %q, want %q", id, objects[id], unit)
		}
	}
}

// TestOwnershipGeneratedOverSOPS: two applications in one namespace each
// generate a Secret "db" from their own encrypted .env. On the cluster
// kustomize hashes each plaintext into a different name; the hub names
// both "db-<hash decided on the cluster>" (render.ClusterHash), which is
// no claim it can check, so it is no conflict.
func TestOwnershipGeneratedOverSOPS(t *testing.T) {
	sopscli.Require(t)
	k := sopscli.NewKey(t)
	root := t.TempDir()
	var apps []*fleet.Application
	for _, name := range []string{"one", "two"} {
		dir := filepath.Join(root, "apps", name, "k")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{
			"kustomization.yaml": []byte("namespace: shared\nsecretGenerator:\n- name: db\n  envs: [db.env]\n"),
			"db.env":             sopscli.Encrypt(t, "db.env", []byte("PASSWORD="+name+"\n"), sopscli.Options{}, k.Recipient),
		}
		for n, data := range files {
			if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		apps = append(apps, &fleet.Application{
			Metadata: fleet.ObjectMeta{Name: name},
			Spec:     fleet.ApplicationSpec{Source: fleet.AppSource{Kustomize: &fleet.PathSource{Path: "k"}}, SyncPolicies: []fleet.SyncPolicy{toClusters("a")}},
			Source:   fleet.Source{File: "apps/" + name + "/app.yaml", Line: 1},
		})
	}
	repo := &fleet.Repo{Root: root, Clusters: []*fleet.Cluster{cluster("a", nil)}, Applications: apps}
	if _, err := Compile(context.Background(), repo, Options{}); err != nil {
		t.Fatalf("compile: %v", err)
	}
}
