package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// vendorVolcanoChart copies the upstream Volcano chart of the pinned
// volcano.sh/volcano (tools/volcano/go.mod) from its Go module into
// dst, as the template's README tells a fleet to: the chart is not kept in
// this repository.
func vendorVolcanoChart(t *testing.T, dst string) {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "volcano.sh/volcano")
	cmd.Dir = filepath.Join(agentproc.ModuleRoot(), "tools", "volcano")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go mod download volcano.sh/volcano: %v\n%s%s", err, out, stderr)
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download -json: %v\n%s", err, out)
	}
	t.Logf("vendoring the Volcano chart of volcano.sh/volcano %s", mod.Version)
	planCopyDir(t, filepath.Join(mod.Dir, "installer", "helm", "chart", "volcano"), dst)
}

// TestVolcanoUpstreamChart: a fleet installs Volcano as the template shows.
// The upstream chart of the pinned Volcano, vendored from its Go module into
// charts/volcano, and the template's apps/volcano application (its example
// file, as is) are rendered by the hub and applied by the agent on a live
// cluster of its own (the chart's admission webhooks would intercept the
// shared cluster's pods). The unit becomes Ready: its pre-install hook Job
// completes and the Deployments become Available, because kwok runs their
// pods; every CRD is Established, the jobflow subchart's included; every
// namespaced object is in volcano-system and every object exists.
func TestVolcanoUpstreamChart(t *testing.T) {
	c := testenv.StartCluster(t, testenv.ClusterOptions{
		Mode: testenv.Full, Nodes: testenv.Nodes("kwok-node", 1, testenv.NodeSpec{}),
	})
	k := c.Client()
	const cluster, ns = "vc1", "volcano-system"

	dir := t.TempDir()
	vendorVolcanoChart(t, filepath.Join(dir, "charts", "volcano"))
	example, err := os.ReadFile(filepath.Join(agentproc.ModuleRoot(), "fleet-repo-template", "apps", "volcano", "app.yaml.example"))
	if err != nil {
		t.Fatal(err)
	}
	treefile.Write(t, dir, map[string]string{
		"apps/volcano/app.yaml": string(example),
		"clusters/" + cluster + ".yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Cluster
metadata:
  name: ` + cluster + `
  labels:
    volcano: fleet
`,
		"fleets/batch.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: batch
spec:
  clusters: [` + cluster + `]
  namespaces:
    - name: ` + ns + `
`,
	})
	hubRender(t, dir)
	repo := fleetrepo.New(t, agentGit(t), "volcano-chart", dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	a.start()
	defer a.stop()

	// Generous: images are not pulled (kwok), but the machine may be busy.
	st := a.waitApplied(4*time.Minute, repo.Head())
	t.Logf("applied:\n%s", describeStatus(st))
	if u := unitOf(st, "volcano"); u == nil {
		t.Fatal("no volcano unit")
	}

	inv, err := a.applier.Inventory(testCtx(t), "volcano")
	if err != nil {
		t.Fatal(err)
	}
	var crds, deployments []string
	for _, e := range inv.Entries {
		id := e.ID
		switch id.GroupKind.Kind {
		case "CustomResourceDefinition":
			crds = append(crds, id.Name)
		case "Deployment":
			deployments = append(deployments, id.Name)
		}
		if id.Namespace != "" && id.Namespace != ns {
			t.Errorf("%s/%s is in namespace %s, not %s", id.GroupKind.Kind, id.Name, id.Namespace, ns)
		}
		// Every object the unit owns is live.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: id.GroupKind.Group, Version: e.Version, Kind: id.GroupKind.Kind})
		if err := k.Get(testCtx(t), client.ObjectKey{Namespace: id.Namespace, Name: id.Name}, u); err != nil {
			t.Errorf("%s %s/%s: %v", id.GroupKind.Kind, id.Namespace, id.Name, err)
		}
	}
	t.Logf("volcano unit: %d objects, CRDs %v, Deployments %v", len(inv.Entries), crds, deployments)

	// The scheduler, the controllers and the admission webhook's server.
	for _, name := range []string{"volcano-scheduler", "volcano-controllers", "volcano-admission"} {
		if !slices.Contains(deployments, name) {
			t.Errorf("Deployment %s not applied (unit has %v)", name, deployments)
			continue
		}
		d, err := getDeployment(t, k, ns, name)
		if err != nil {
			t.Errorf("Deployment %s: %v", name, err)
			continue
		}
		if ok, _ := deploymentAvailable(d); !ok {
			t.Errorf("Deployment %s not Available: %+v", name, d.Status)
		}
	}

	// Volcano's own CRDs and the jobflow subchart's (which its templates
	// read with .Files.Get), each Established.
	for _, want := range []string{"jobs.batch.volcano.sh", "queues.scheduling.volcano.sh", "podgroups.scheduling.volcano.sh", "jobflows.flow.volcano.sh", "jobtemplates.flow.volcano.sh"} {
		if !slices.Contains(crds, want) {
			t.Errorf("CRD %s not applied (unit has %v)", want, crds)
		}
	}
	for _, name := range crds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k.Get(testCtx(t), client.ObjectKey{Name: name}, crd); err != nil {
			t.Errorf("CRD %s: %v", name, err)
			continue
		}
		established := false
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			t.Errorf("CRD %s not Established: %+v", name, crd.Status.Conditions)
		}
		if !strings.HasSuffix(name, ".volcano.sh") {
			t.Errorf("unexpected CRD %s", name)
		}
	}
}

// TestVolcanoUnitsWaitForVolcano: on a fresh cluster whose fleet installs
// Volcano's Queue CRD through an application (as the template's
// apps/volcano does with the whole chart), the generated flotilla-queues
// unit waits for that application and converges, its Queue created,
// instead of failing until the CRD exists: no status document the agent
// committed along the way shows it failing. The upstream chart itself
// cannot run here: its admission webhooks (failurePolicy Fail on Queues)
// would be served by kwok's pods, which serve nothing, so the application
// holds the chart's Queue CRD alone.
func TestVolcanoUnitsWaitForVolcano(t *testing.T) {
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	const cluster = "vq1"
	chart := t.TempDir()
	vendorVolcanoChart(t, chart)
	crd, err := os.ReadFile(filepath.Join(chart, "crd", "bases", "scheduling.volcano.sh_queues.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	treefile.Write(t, dir, map[string]string{
		"apps/volcano/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: volcano
spec:
  source: {manifests: {path: manifests}}
  syncPolicies: [{destination: {fleet: batch}}]
`,
		"apps/volcano/manifests/queues-crd.yaml": string(crd),
		"clusters/" + cluster + ".yaml":          "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + cluster + "\n",
		"fleets/batch.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: batch
spec:
  clusters: [` + cluster + `]
  queues:
    - name: training
      weight: 1
`,
	})
	hubRender(t, dir)
	srv := newGitServer(t)
	repo := fleetrepo.New(t, srv, "volcano-wait", dir)
	startWaveAgent(t, repo, cluster, c)

	queue := &unstructured.Unstructured{}
	queue.SetGroupVersionKind(schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "Queue"})
	bare := srv.RepoPath("volcano-wait")
	statusRef := "refs/heads/flotilla/status/" + cluster
	// The status the agent committed, not only its loop's: the history
	// read below must hold the converged document.
	waitFor(t, 2*time.Minute, "a committed status with every unit Ready and Queue training created", func() (bool, string) {
		data, err := exec.Command("git", "-C", bare, "show", statusRef+":status.yaml").Output()
		if err != nil {
			return false, "no status committed yet"
		}
		st, err := status.Decode(data)
		if err != nil {
			return false, err.Error()
		}
		if !allUnitsReady(st) || st.AppliedRevision != repo.Head() {
			return false, describeStatus(st)
		}
		err = c.Client().Get(testCtx(t), client.ObjectKey{Name: "training"}, queue)
		return err == nil, fmt.Sprint(err)
	})

	// Every status document the agent committed on its way there.
	log, err := exec.Command("git", "-C", bare, "log", "--format=%H", statusRef).Output()
	if err != nil {
		t.Fatal(err)
	}
	commits := strings.Fields(string(log))
	for _, h := range commits {
		data, err := exec.Command("git", "-C", bare, "show", h+":status.yaml").Output()
		if err != nil {
			t.Fatal(err)
		}
		doc, err := status.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range doc.Units {
			if u.Name == "flotilla-queues" && status.UnitFailing(u) {
				t.Errorf("status commit %s: flotilla-queues failing before Volcano's CRD existed: %+v", h[:12], u.Conditions)
			}
		}
	}
	t.Logf("%d status commits read", len(commits))
}
