package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// outageUnits are n units, each a namespace of its own with cms ConfigMaps:
// enough API writes that a cold apply takes a while.
func outageUnits(prefix string, n, cms int) ([]handUnit, map[string]bool) {
	var units []handUnit
	want := map[string]bool{}
	for i := range n {
		ns := fmt.Sprintf("%s-%02d", prefix, i)
		files := map[string]string{"ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n"}
		res := []string{"ns.yaml"}
		for j := range cms {
			name := fmt.Sprintf("cm%d.yaml", j)
			files[name] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  namespace: %s\ndata:\n  unit: %q\n", j, ns, ns)
			res = append(res, name)
			want[ns+"/"+fmt.Sprintf("cm-%d", j)] = true
		}
		files["kustomization.yaml"] = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + strings.Join(res, "\n  - ") + "\n"
		units = append(units, handUnit{name: fmt.Sprintf("u%02d", i), files: files})
	}
	return units, want
}

// managedConfigMaps lists every ConfigMap, in any namespace, labelled as
// managed by flotilla, as namespace/name; the agent's own inventories (in
// its namespace) are not slice objects and are left out.
func managedConfigMaps(t *testing.T, k client.Client, agentNS string) ([]string, error) {
	t.Helper()
	var l corev1.ConfigMapList
	if err := k.List(testCtx(t), &l, client.MatchingLabels{apply.LabelManagedBy: apply.ManagedByValue}); err != nil {
		return nil, err
	}
	var out []string
	for _, cm := range l.Items {
		if cm.Namespace != agentNS {
			out = append(out, cm.Namespace+"/"+cm.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// TestFaultAPIServerRestartDuringColdApply stops the cluster's
// kube-apiserver while the real agent binary cold-applies 50 units and
// starts it again (same etcd, port and certificates): the agent retries,
// converges (every unit Ready, every object present), leaves no managed
// object outside its slice, and reported the outage meanwhile.
func TestFaultAPIServerRestartDuringColdApply(t *testing.T) {
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	k := c.Client()
	srv := agentGit(t)
	const cluster, agentNS = "apiserver-outage", "flotilla-apiserver-outage"
	dir := t.TempDir()
	units, want := outageUnits("outage", 50, 4)
	writeHandSlice(t, dir, cluster, units)
	repo := fleetrepo.New(t, srv, cluster, dir)
	if err := c.CreateNamespace(testCtx(t), agentNS); err != nil {
		t.Fatal(err)
	}
	creds := agentUser(t, srv, cluster)
	// A low QPS stretches the cold apply so that the stop is likely to land
	// in it; whether it did is logged, not asserted.
	p := startAgentProc(t, c, repo, cluster, agentNS, "outage-agent", t.TempDir(), creds,
		"--interval", "3s", "--workers", "2", "--kube-api-qps", "20", "--kube-api-burst", "20")
	rev := repo.Head()

	// Stop once the agent is at work: it has begun applying units.
	waitFor(t, 2*time.Minute, "the agent to apply a unit", func() (bool, string) {
		return p.Count("applying unit") > 0, p.LogTail(5)
	})
	before := len(presentOf(t, k, want))
	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	cyclesAtStop := p.Cycles()
	t.Logf("kube-apiserver stopped with %d of %d ConfigMaps applied and %d cycles finished (mid-apply: %v)",
		before, len(want), cyclesAtStop, before > 0 && before < len(want) && cyclesAtStop == 0)
	// Long enough for cycles to fail against the dead endpoint.
	time.Sleep(15 * time.Second)
	if err := c.StartAPIServer(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver restarted; the agent has finished %d cycles", p.Cycles())

	p.waitStatus(5*time.Minute, "every unit Ready at "+rev, func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == rev && len(st.Units) == len(units) && allUnitsReady(st)
	})
	if missing := len(want) - len(presentOf(t, k, want)); missing != 0 {
		t.Errorf("%d ConfigMaps of the slice are missing after convergence", missing)
	}
	got, err := managedConfigMaps(t, k, agentNS)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range got {
		if !want[key] {
			t.Errorf("orphan: managed ConfigMap %s is not in the slice", key)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d managed ConfigMaps, want %d", len(got), len(want))
	}

	// The outage was reported: a cycle that did not succeed, or a unit
	// failure with its error, in the log (which keeps every record, so this
	// does not race).
	var reported []string
	for _, r := range p.Records("cycle finished") {
		if r["result"] != "success" {
			reported = append(reported, fmt.Sprintf("cycle %v (%v units failed): %v", r["result"], r["failed"], r["error"]))
		}
	}
	for _, r := range p.Records("unit failed") {
		reported = append(reported, fmt.Sprintf("unit %v failed: %v", r["unit"], r["error"]))
	}
	if len(reported) == 0 {
		t.Errorf("no failed cycle was logged while kube-apiserver was down")
	} else {
		t.Logf("%d records reported the outage; first: %s", len(reported), reported[0])
	}
}

// presentOf returns which of want's namespace/name ConfigMaps exist; an
// unreachable apiserver counts as none.
func presentOf(t *testing.T, k client.Client, want map[string]bool) []string {
	t.Helper()
	var l corev1.ConfigMapList
	if err := k.List(testCtx(t), &l, client.MatchingLabels{apply.LabelManagedBy: apply.ManagedByValue}); err != nil {
		return nil
	}
	var out []string
	for _, cm := range l.Items {
		if key := cm.Namespace + "/" + cm.Name; want[key] {
			out = append(out, key)
		}
	}
	return out
}
