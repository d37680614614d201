package e2e_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor"
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor/ocitest"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/ociregistry"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// TestAgentAppliesOCIChart: a chart pushed with Helm's client to an OCI
// registry (TLS, basic auth) is vendored by `flotilla render` at the
// highest version its range allows, pinned by digest; the registry is
// then stopped, and the agent applies the vendored chart from Git alone:
// its Deployment comes up with the application's values.
func TestAgentAppliesOCIChart(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	const cluster, ns = "oci-chart", "oci-cache"
	reg := ociregistry.Start(t)
	manifests, err := ocitest.As(reg).PushDir("team/charts", "../fixtures/charts/redis-cache", "0.2.0", "0.3.0", "0.3.4", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	config, err := reg.ConfigFile(t.TempDir(), reg.Username, reg.Password)
	if err != nil {
		t.Fatal(err)
	}

	files := oneClusterFleet(cluster, "    - name: "+ns+"\n")
	files["apps/cache/app.yaml"] = `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: cache
spec:
  source:
    helm:
      repo: oci://` + reg.Host + `/team/charts
      chart: redis-cache
      version: ~0.3.0
      values:
        maxMemory: 48mb
  namespace: ` + ns + `
  syncPolicies:
    - name: all
      destination:
        fleet: ` + cluster + `
`
	dir := t.TempDir()
	treefile.Write(t, dir, files)
	if _, stderr, code := planCLI(t, "render", "--repo", dir, "--registry-config", config, "--registry-ca-file", reg.CAFile); code != 0 {
		t.Fatalf("flotilla render: exit %d\n%s", code, stderr)
	}
	lock, err := os.ReadFile(dir + "/" + chartvendor.ChartLockFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lock), "resolved: 0.3.4\n") || !strings.Contains(string(lock), "manifestDigest: "+manifests["0.3.4"]+"\n") {
		t.Fatalf("lock does not pin 0.3.4 by its manifest digest %s:\n%s", manifests["0.3.4"], lock)
	}

	// From here on nothing reaches the registry: the agent has only Git.
	reg.Stop()
	repo := fleetrepo.New(t, newGitServer(t), cluster, dir)
	a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo})
	rev := repo.Head()
	st := cycleUntil(t, a, 20, "applied at "+rev, appliedAt(rev))
	if u := unitOf(st, "cache"); u == nil || !unitIsReady(u) {
		t.Fatalf("unit cache not Ready:\n%s", describeStatus(st))
	}
	d, err := getDeployment(t, k, ns, "cache")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Labels["app.kubernetes.io/name"]; got != "redis-cache" {
		t.Errorf("Deployment label app.kubernetes.io/name = %q, want redis-cache", got)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "48mb") {
		t.Errorf("container args %v lack the application's maxMemory 48mb", args)
	}
	if avail, _ := deploymentAvailable(d); !avail {
		t.Errorf("Deployment %s/cache not available: %+v", ns, d.Status)
	}
}
