package e2e_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/hub/plan"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// planApplyFleet is a small fleet repo of one cluster whose namespaces are
// its own (the e2e cluster is shared): a kustomize app with a replicas
// override, an in-repo Helm chart that prints .Capabilities.KubeVersion
// into an annotation (plan fidelity shows as a field), and a Secret.
func planApplyFleet(cluster, kubeVersion string) map[string]string {
	ns := func(s string) string { return cluster + "-" + s }
	return map[string]string{
		"clusters/" + cluster + ".yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: ` + cluster + `
  labels:
    env: ` + cluster + `
spec:
  kubernetesVersion: ` + kubeVersion + `
`,
		"fleets/" + cluster + ".yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: ` + cluster + `
spec:
  selector:
    matchLabels:
      env: ` + cluster + `
  namespaces:
    - name: ` + ns("web") + `
    - name: ` + ns("shop") + `
`,
		"apps/web/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: web
spec:
  source:
    kustomize:
      path: base
  namespace: ` + ns("web") + `
  syncPolicies:
    - name: all
      destination:
        fleet: ` + cluster + `
      overrides:
        replicas:
          - name: web
            count: 2
`,
		"apps/web/base/kustomization.yaml": "resources:\n  - deployment.yaml\n  - service.yaml\n  - configmap.yaml\n",
		"apps/web/base/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app.kubernetes.io/name: web
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: web
  template:
    metadata:
      labels:
        app.kubernetes.io/name: web
    spec:
      containers:
        - name: web
          image: nginx:1.27
          ports:
            - containerPort: 80
          resources:
            requests:
              cpu: 5m
              memory: 8Mi
`,
		"apps/web/base/service.yaml":   "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector:\n    app.kubernetes.io/name: web\n  ports:\n    - port: 80\n",
		"apps/web/base/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  greeting: hello\n",
		"apps/cache/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: cache
spec:
  source:
    helm:
      path: chart
      values:
        maxMemory: 64mb
  namespace: ` + ns("shop") + `
  syncPolicies:
    - name: all
      destination:
        fleet: ` + cluster + `
`,
		"apps/cache/chart/Chart.yaml":  "apiVersion: v2\nname: cache\nversion: 1.0.0\n",
		"apps/cache/chart/values.yaml": "maxMemory: 16mb\n",
		"apps/cache/chart/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels:
    app.kubernetes.io/name: cache
    helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
  annotations:
    flotilla.dev/kube-version: {{ .Capabilities.KubeVersion.Version | quote }}
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: cache
  template:
    metadata:
      labels:
        app.kubernetes.io/name: cache
    spec:
      containers:
        - name: redis
          image: redis:7.4
          args: ["--maxmemory", {{ .Values.maxMemory | quote }}]
          resources:
            requests:
              cpu: 5m
              memory: 8Mi
`,
		"apps/creds/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: creds
spec:
  source:
    manifests:
      path: manifests
  namespace: ` + ns("shop") + `
  syncPolicies:
    - name: all
      destination:
        fleet: ` + cluster + `
`,
		"apps/creds/manifests/secret.yaml": planApplySecret("first-password"),
	}
}

func planApplySecret(password string) string {
	return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\nstringData:\n  user: app\n  password: " + password + "\n"
}

// TestPlanEqualsApply plans a change, merges it, lets the agent apply it,
// and checks that every object the plan adds or changes is live with
// exactly the planned fields (as a subset of the live object, which the
// API server defaults), owned by the agent's field manager, and that
// every object the plan removes is gone.
func TestPlanEqualsApply(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	const cluster = "plan-e2e"
	dc, err := discovery.NewDiscoveryClientForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	sv, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}

	// The fleet repo on the Git server, rendered as `flotilla render` would.
	dir := t.TempDir()
	planWriteFiles(t, dir, planApplyFleet(cluster, sv.GitVersion))
	hubRender(t, dir)
	srv := agentGit(t)
	repo := fleetrepo.New(t, srv, "plan-apply", dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo, interval: 3 * time.Second})
	a.start()
	a.waitApplied(4*time.Minute, repo.Head())

	// A pull request, in a clone: edit, render, commit, plan.
	clone := planClone(t, srv, "plan-apply")
	head := filepath.Join(clone, "apps")
	planWriteFiles(t, clone, map[string]string{
		"apps/web/base/kustomization.yaml": "resources:\n  - deployment.yaml\n  - configmap.yaml\n", // Service removed
		"apps/web/base/configmap.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  greeting: hello, fleet\n",
		"apps/creds/manifests/secret.yaml": planApplySecret("second-password"),
		"apps/extra/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: extra
spec:
  source:
    manifests:
      path: manifests
  namespace: ` + cluster + `-web
  syncPolicies:
    - name: all
      destination:
        fleet: ` + cluster + `
`,
		"apps/extra/manifests/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  added: \"yes\"\n",
	})
	planEdit(t, filepath.Join(head, "web", "app.yaml"), "count: 2", "count: 3")
	planEdit(t, filepath.Join(head, "cache", "app.yaml"), "maxMemory: 64mb", "maxMemory: 128mb")
	hubRender(t, clone)
	planGitAuth(t, srv, clone, "add", "-A")
	planGitAuth(t, srv, clone, "commit", "-q", "-m", "change everything a plan can show")

	p, err := plan.Compute(context.Background(), plan.Options{RepoDir: clone, Base: "origin/main", Head: "HEAD"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Clusters) != 1 || p.Clusters[0].Name != cluster || len(p.Warnings) != 0 || p.Failed {
		t.Fatalf("plan: %d clusters, warnings %q, failed %v", len(p.Clusters), p.Warnings, p.Failed)
	}
	cp := p.Clusters[0]
	if cp.Capabilities.KubeVersion != sv.GitVersion {
		t.Errorf("planned with Kubernetes %q, the cluster runs %q", cp.Capabilities.KubeVersion, sv.GitVersion)
	}
	var changes []string
	for _, u := range cp.Units {
		for _, o := range u.Objects {
			changes = append(changes, fmt.Sprintf("%s %s %s", u.Name, o.Change, o.ID()))
		}
	}
	sort.Strings(changes)
	want := []string{
		"cache changed Deployment " + cluster + "-shop/cache",
		"creds changed Secret " + cluster + "-shop/db",
		"extra added ConfigMap " + cluster + "-web/extra",
		"web changed ConfigMap " + cluster + "-web/web-config",
		"web changed Deployment " + cluster + "-web/web",
		"web removed Service " + cluster + "-web/web",
	}
	if strings.Join(changes, "\n") != strings.Join(want, "\n") {
		t.Fatalf("planned changes:\n%s\nwant:\n%s", strings.Join(changes, "\n"), strings.Join(want, "\n"))
	}

	// Merge: the maintainer pushes the commit to main; the agent applies.
	planGitAuth(t, srv, clone, "push", "-q", "origin", "HEAD:refs/heads/main")
	merged := "main@sha1:" + planGitAuth(t, srv, clone, "rev-parse", "HEAD")
	a.waitApplied(4*time.Minute, merged)

	ctx := testCtx(t)
	for _, u := range cp.Units {
		for _, o := range u.Objects {
			live := &unstructured.Unstructured{}
			live.SetAPIVersion(o.APIVersion)
			live.SetKind(o.Kind)
			err := k.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, live)
			if o.Change == plan.Removed {
				if !apierrors.IsNotFound(err) {
					t.Errorf("%s: planned removed, live: %v", o.ID(), err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: planned %s, not live: %v", o.ID(), o.Change, err)
				continue
			}
			after := o.After.Object
			if o.Kind == "Secret" {
				// Values are masked in any plan: check the keys, and the
				// value the test knows.
				after = withoutSecretValues(after)
				if got, _, _ := unstructured.NestedString(live.Object, "data", "password"); got != base64.StdEncoding.EncodeToString([]byte("second-password")) {
					t.Errorf("%s: the live password is not the merged one", o.ID())
				}
			}
			if where := subsetOf(after, live.Object, ""); where != "" {
				t.Errorf("%s: planned field differs from the live object at %s", o.ID(), where)
			}
			if !managedBy(live, "flotilla") {
				t.Errorf("%s: no server-side apply entry of field manager flotilla", o.ID())
			}
		}
	}
	// Plan fidelity: the chart saw the live version on both sides.
	dep := &unstructured.Unstructured{}
	dep.SetAPIVersion("apps/v1")
	dep.SetKind("Deployment")
	if err := k.Get(ctx, client.ObjectKey{Namespace: cluster + "-shop", Name: "cache"}, dep); err != nil {
		t.Fatal(err)
	}
	if got := dep.GetAnnotations()["flotilla.dev/kube-version"]; got != sv.GitVersion {
		t.Errorf("the agent rendered Kubernetes %q into the chart, the plan %q", got, sv.GitVersion)
	}
	st := a.loop.Status()
	if st == nil || st.AppliedRevision != merged || condOf(st.Conditions, status.ConditionReady) == nil {
		t.Errorf("status after the merge: %s", describeStatus(st))
	}
}

// subsetOf reports the first path where planned is not contained in live
// ("" when it is): maps by key, lists element by element with equal
// length, numbers by value.
func subsetOf(planned, live any, path string) string {
	switch p := planned.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return path + " (not a mapping)"
		}
		for k, v := range p {
			lv, ok := l[k]
			if !ok {
				return path + "." + k + " (missing)"
			}
			if where := subsetOf(v, lv, path+"."+k); where != "" {
				return where
			}
		}
		return ""
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(p) {
			return path + " (list length)"
		}
		for i := range p {
			if where := subsetOf(p[i], l[i], fmt.Sprintf("%s[%d]", path, i)); where != "" {
				return where
			}
		}
		return ""
	}
	if pn, ok := toFloat(planned); ok {
		if ln, ok := toFloat(live); ok && pn == ln {
			return ""
		}
		return fmt.Sprintf("%s (%v, live %v)", path, planned, live)
	}
	if !reflect.DeepEqual(planned, live) {
		return fmt.Sprintf("%s (%v, live %v)", path, planned, live)
	}
	return ""
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// withoutSecretValues keeps a Secret's keys but not its (masked) values;
// stringData becomes data, as the API server stores it.
func withoutSecretValues(o map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range o {
		if k != "data" && k != "stringData" {
			out[k] = v
		}
	}
	return out
}

func managedBy(o *unstructured.Unstructured, manager string) bool {
	for _, mf := range o.GetManagedFields() {
		if mf.Manager == manager && mf.Operation == "Apply" {
			return true
		}
	}
	return false
}

// planClone clones a repository of the Git server as the maintainer.
func planClone(t *testing.T, srv *gitserver.Server, repo string) string {
	t.Helper()
	dir := t.TempDir()
	planGitAuth(t, srv, "", "clone", "-q", srv.URL(repo), dir)
	return dir
}

// planGitAuth runs git with the maintainer's credentials.
func planGitAuth(t *testing.T, srv *gitserver.Server, dir string, args ...string) string {
	t.Helper()
	auth := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(gitserver.Maintainer+":"+srv.Password(gitserver.Maintainer)))
	cmd := exec.Command("git", append([]string{"-c", "http.extraHeader=" + auth,
		"-c", "user.name=Fleet Maintainer", "-c", "user.email=maintainer@example.com"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func planEdit(t *testing.T, path, old, new string) {
	t.Helper()
	s := planReadFile(t, path)
	if !strings.Contains(s, old) {
		t.Fatalf("%s has no %q", path, old)
	}
	planWriteFiles(t, filepath.Dir(path), map[string]string{filepath.Base(path): strings.Replace(s, old, new, 1)})
}
