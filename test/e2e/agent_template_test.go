package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// templateWorkloads are member1's Deployments in the template, with the
// replicas the template gives them.
var templateWorkloads = []struct {
	ns, name string
	replicas int32
}{
	{"backend", "backend", 10},
	{"web", "nginx", 3},
	{"iot", "iot-collector", 3},
	{"shop", "redis-cache", 1},
	{"shop", "backend-api", 2},
	{"shop", "frontend-web", 1},
}

// TestAgentTemplateLifecycle drives the agent of member1 through the
// template's life: the slice rendered by `flotilla render` is applied and
// becomes Ready on kwok nodes, in dependsOn order; a kubectl-edit-style
// change is reverted within an interval; a later commit updates a unit;
// removing an application prunes its objects and nothing else; a broken
// kustomization changes nothing in the cluster and is reported in status.
func TestAgentTemplateLifecycle(t *testing.T) {
	runTemplateLifecycle(t, agentCluster(t), templateOptions{})
}

// templateOptions vary how runTemplateLifecycle runs the agent.
type templateOptions struct {
	// kubeconfig, when set, runs the flotilla-agent binary with it (and
	// --leader-elect, as the DaemonSet does) instead of the in-process loop
	// with the admin config.
	kubeconfig string
	// namespace is the agent's own (Lease, inventories); flotilla-member1
	// when empty.
	namespace string
	// repoName names the fleet repo on the shared Git server, which holds
	// every test's repos; "template" when empty.
	repoName string
}

// templateAgent is what the lifecycle needs of an agent, in process or a
// process.
type templateAgent interface {
	waitStatus(timeout time.Duration, what string, cond func(*status.ClusterStatus) bool) *status.ClusterStatus
	waitApplied(timeout time.Duration, revision string) *status.ClusterStatus
	// logText is the agent's JSON log so far.
	logText() string
	// statusFile reads the status file the agent wrote.
	statusFile() (*status.ClusterStatus, error)
}

func (a *inprocAgent) logText() string                            { return a.logs.String() }
func (a *inprocAgent) statusFile() (*status.ClusterStatus, error) { return readStatusFile(a) }

func (p *agentProc) logText() string {
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		p.t.Errorf("agent log: %v", err)
	}
	return string(b)
}

func (p *agentProc) statusFile() (*status.ClusterStatus, error) {
	return agentproc.ReadStatus(p.cacheDir)
}

func (p *agentProc) waitApplied(timeout time.Duration, revision string) *status.ClusterStatus {
	p.t.Helper()
	return p.waitStatus(timeout, "every unit Ready at "+revision, func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == revision && allUnitsReady(st)
	})
}

// runTemplateLifecycle is TestAgentTemplateLifecycle's body, on cluster c
// (which must not hold the template's apps yet).
func runTemplateLifecycle(t *testing.T, c *testenv.Cluster, o templateOptions) {
	if o.namespace == "" {
		o.namespace = "flotilla-member1"
	}
	if o.repoName == "" {
		o.repoName = "template"
	}
	k := c.Client()
	dir := copyTemplate(t)
	hubRender(t, dir)
	repo := fleetrepo.New(t, agentGit(t), o.repoName, dir)
	const interval = 3 * time.Second
	var a templateAgent
	if o.kubeconfig == "" {
		in := newInprocAgent(t, c, agentSpec{cluster: "member1", repo: repo, interval: interval, namespace: o.namespace})
		in.start()
		a = in
	} else {
		creds := agentUser(t, repo.Server, "member1")
		a = startAgentProcKubeconfig(t, o.kubeconfig, repo, "member1", o.namespace, "member1-agent", t.TempDir(), creds,
			"--interval", interval.String(), "--leader-elect")
	}

	rev1 := repo.Head()
	var st *status.ClusterStatus
	ok := t.Run("applied and ready", func(t *testing.T) {
		st = a.waitApplied(4*time.Minute, rev1)
		if len(st.Units) != 10 {
			t.Fatalf("%d units in status, want the template's 10:\n%s", len(st.Units), describeStatus(st))
		}
		if st.KubernetesVersion == "" || len(st.APIVersions) == 0 || st.DesiredRevision != rev1 || st.FetchedRevision != rev1 {
			t.Fatalf("status header: %+v", st)
		}
		for _, w := range templateWorkloads {
			d, err := getDeployment(t, k, w.ns, w.name)
			if err != nil {
				t.Fatalf("deployment %s/%s: %v", w.ns, w.name, err)
			}
			if avail, _ := deploymentAvailable(d); !avail || d.Status.AvailableReplicas != w.replicas || *d.Spec.Replicas != w.replicas {
				t.Errorf("deployment %s/%s: available=%v %d/%d replicas, want %d", w.ns, w.name, avail, d.Status.AvailableReplicas, *d.Spec.Replicas, w.replicas)
			}
			assertPodsOnKwok(t, k, w.ns, d.Spec.Selector.MatchLabels, int(w.replicas))
		}
		sts := &appsv1.StatefulSet{}
		if err := k.Get(testCtx(t), client.ObjectKey{Namespace: "shop", Name: "mysql-db"}, sts); err != nil {
			t.Fatal(err)
		}
		if sts.Status.ReadyReplicas != 1 {
			t.Errorf("statefulset shop/mysql-db: %d ready replicas", sts.Status.ReadyReplicas)
		}
		// Objects carry the ownership labels; each unit has an inventory.
		for _, u := range st.Units {
			if u.Objects == 0 || u.AppliedRevision != rev1 || u.Hash == "" {
				t.Errorf("unit %s: %+v", u.Name, u)
			}
			cm := &corev1.ConfigMap{}
			if err := k.Get(testCtx(t), client.ObjectKey{Namespace: o.namespace, Name: apply.InventoryName(u.Name)}, cm); err != nil {
				t.Errorf("inventory of %s: %v", u.Name, err)
			}
		}
	})
	if !ok {
		return
	}

	t.Run("dependsOn order", func(t *testing.T) {
		// frontend-web depends on backend-api, which depends on mysql-db and
		// redis-cache: each dependent was created only after its
		// dependencies were Available (the controller's own timestamps) and
		// Ready in the agent's status.
		assertCreatedAfterAvailable(t, k, st, "shop", "backend-api", "shop", "redis-cache", "redis-cache")
		assertCreatedAfterAvailable(t, k, st, "shop", "frontend-web", "shop", "backend-api", "backend-api")
		dep := &appsv1.Deployment{}
		if err := k.Get(testCtx(t), client.ObjectKey{Namespace: "shop", Name: "backend-api"}, dep); err != nil {
			t.Fatal(err)
		}
		mysqlReady := condOf(unitOf(st, "mysql-db").Conditions, status.ConditionReady).LastTransitionTime.Time
		if dep.CreationTimestamp.Time.Before(mysqlReady.Truncate(time.Second)) {
			t.Errorf("backend-api created at %s, before mysql-db was Ready at %s", dep.CreationTimestamp, mysqlReady)
		}
		// The agent's own record: each dependent's apply began after its
		// dependencies' applies returned Ready.
		events := agentEvents(t, a.logText())
		for _, e := range [][2]string{{"backend-api", "mysql-db"}, {"backend-api", "redis-cache"}, {"frontend-web", "backend-api"}, {"backend", "flotilla-namespaces"}} {
			applying, ok1 := events.first("applying unit", e[0])
			ready, ok2 := events.first("unit applied", e[1])
			if !ok1 || !ok2 || !applying.After(ready) {
				t.Errorf("%s began applying at %s, its dependency %s was applied and Ready at %s", e[0], applying.Format(time.StampMicro), e[1], ready.Format(time.StampMicro))
			}
		}
		for _, ns := range []string{"backend", "iot", "shop", "web"} {
			nsObj := &corev1.Namespace{}
			if err := k.Get(testCtx(t), client.ObjectKey{Name: ns}, nsObj); err != nil {
				t.Fatal(err)
			}
			if dep.CreationTimestamp.Before(&nsObj.CreationTimestamp) {
				t.Errorf("namespace %s created after backend-api", ns)
			}
		}
	})

	t.Run("drift reverted within an interval", func(t *testing.T) {
		d, err := getDeployment(t, k, "backend", "backend")
		if err != nil {
			t.Fatal(err)
		}
		one := int32(1)
		d.Spec.Replicas = &one
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "trace"}}
		if err := k.Update(testCtx(t), d, client.FieldOwner("kubectl-edit")); err != nil {
			t.Fatal(err)
		}
		edited := time.Now()
		// Generous: a busy machine may need several intervals; the order of
		// cycles below is what proves the revert came with the next one.
		waitFor(t, 2*time.Minute, "the edit to be reverted", func() (bool, string) {
			d, err := getDeployment(t, k, "backend", "backend")
			if err != nil {
				return false, err.Error()
			}
			env := d.Spec.Template.Spec.Containers[0].Env
			return *d.Spec.Replicas == 10 && len(env) == 1 && env[0].Value == "info", fmt.Sprintf("replicas %d env %v", *d.Spec.Replicas, env)
		})
		t.Logf("edit reverted after %s (interval %s)", time.Since(edited).Round(10*time.Millisecond), interval)
		assertCorrectedByNextCycle(t, edited, a.logText)
		a.waitStatus(time.Minute, "the drift correction in status", func(st *status.ClusterStatus) bool {
			u := unitOf(st, "backend")
			return u != nil && u.DriftCorrections >= 1 && unitIsReady(u)
		})
	})

	t.Run("a later commit updates a unit", func(t *testing.T) {
		// iot-collector: 3 replicas on cloud clusters → 2.
		repo.Edit(t, "apps/iot-collector/app.yaml", "count: 3", "count: 2")
		hubRender(t, repo.Dir)
		before := managedObjects(t, k, "backend", "shop", "web")
		rev2 := repo.Push(t, "iot-collector: 2 replicas")
		a.waitApplied(2*time.Minute, rev2)
		d, err := getDeployment(t, k, "iot", "iot-collector")
		if err != nil {
			t.Fatal(err)
		}
		if *d.Spec.Replicas != 2 {
			t.Fatalf("iot-collector has %d replicas, want 2", *d.Spec.Replicas)
		}
		if after := managedObjects(t, k, "backend", "shop", "web"); !equalMaps(before, after) {
			t.Fatalf("other units' objects changed: %v → %v", before, after)
		}
	})

	t.Run("removing an app prunes its objects and nothing else", func(t *testing.T) {
		before := managedObjects(t, k, "backend", "iot", "shop", "web")
		if before["Deployment/web/nginx"] != "nginx" || before["Service/web/nginx"] != "nginx" {
			t.Fatalf("nginx objects before removal: %v", before)
		}
		repo.Remove(t, "apps/nginx")
		hubRender(t, repo.Dir)
		rev3 := repo.Push(t, "remove nginx")
		st := a.waitApplied(2*time.Minute, rev3)
		if unitOf(st, "nginx") != nil {
			t.Fatalf("nginx still in status:\n%s", describeStatus(st))
		}
		waitFor(t, time.Minute, "nginx's objects to be gone", func() (bool, string) {
			after := managedObjects(t, k, "backend", "iot", "shop", "web")
			var left []string
			for id, unit := range after {
				if unit == "nginx" {
					left = append(left, id)
				}
			}
			return len(left) == 0, strings.Join(left, ", ")
		})
		after := managedObjects(t, k, "backend", "iot", "shop", "web")
		for id, unit := range before {
			if unit == "nginx" {
				continue
			}
			if after[id] != unit {
				t.Errorf("%s (unit %s) is gone after removing nginx", id, unit)
			}
		}
		ns := &corev1.Namespace{}
		if err := k.Get(testCtx(t), client.ObjectKey{Name: "web"}, ns); err != nil || ns.DeletionTimestamp != nil {
			t.Errorf("namespace web (unit flotilla-namespaces) must stay: %v", err)
		}
		cm := &corev1.ConfigMap{}
		if err := k.Get(testCtx(t), client.ObjectKey{Namespace: o.namespace, Name: apply.InventoryName("nginx")}, cm); !apierrors.IsNotFound(err) {
			t.Errorf("inventory of nginx: %v, want not found", err)
		}
	})

	t.Run("a broken kustomization changes nothing and is reported", func(t *testing.T) {
		good := repo.Head()
		dep, err := getDeployment(t, k, "backend", "backend")
		if err != nil {
			t.Fatal(err)
		}
		rv := dep.ResourceVersion
		// Referencing a file that does not exist, and changing replicas so
		// the unit's hash changes.
		repo.Edit(t, "apps/backend/base/kustomization.yaml", "resources:", "resources:\n  - does-not-exist.yaml")
		repo.Edit(t, "apps/backend/base/deployment.yaml", "replicas: 2", "replicas: 4")
		hubRender(t, repo.Dir)
		bad := repo.Push(t, "break backend")
		st := a.waitStatus(2*time.Minute, "backend's render failure in status", func(st *status.ClusterStatus) bool {
			u := unitOf(st, "backend")
			if st.FetchedRevision != bad || u == nil {
				return false
			}
			c := condOf(u.Conditions, status.ConditionReady)
			return c != nil && c.Reason == status.ReasonRenderFailed
		})
		u := unitOf(st, "backend")
		if !strings.Contains(u.LastError, "does-not-exist.yaml") || u.AppliedRevision != good {
			t.Errorf("backend status: %+v", u)
		}
		if stalled := condOf(u.Conditions, status.ConditionStalled); stalled == nil || stalled.Status != metav1.ConditionTrue {
			t.Errorf("backend not Stalled: %+v", u.Conditions)
		}
		if st.AppliedRevision != good {
			t.Errorf("cluster applied revision %s, want the last good %s", st.AppliedRevision, good)
		}
		for _, other := range st.Units {
			if other.Name != "backend" && (!unitIsReady(&other) || other.AppliedRevision != bad) {
				t.Errorf("unit %s must be Ready at %s: %+v", other.Name, bad, other)
			}
		}
		// The written status file says the same. The agent writes it after
		// the in-memory status the wait above read, so it may lag a moment.
		waitFor(t, time.Minute, "backend's error in the status file", func() (bool, string) {
			file, err := a.statusFile()
			if err != nil {
				return false, err.Error()
			}
			u := unitOf(file, "backend")
			return u != nil && strings.Contains(u.LastError, "does-not-exist.yaml"), fmt.Sprintf("backend in the file: %+v", u)
		})
		// Two more cycles (counted, not slept for): the Deployment was
		// never written.
		afterBad := time.Now()
		waitFor(t, 2*time.Minute, "two more cycles", func() (bool, string) {
			n := len(cyclesAfter(a.logText(), afterBad))
			return n >= 2, fmt.Sprintf("%d cycles", n)
		})
		dep, err = getDeployment(t, k, "backend", "backend")
		if err != nil {
			t.Fatal(err)
		}
		if dep.ResourceVersion != rv || *dep.Spec.Replicas != 10 {
			t.Errorf("backend Deployment changed by a broken commit: resourceVersion %s → %s, replicas %d", rv, dep.ResourceVersion, *dep.Spec.Replicas)
		}

		// Fixing it applies the new content.
		repo.Edit(t, "apps/backend/base/kustomization.yaml", "resources:\n  - does-not-exist.yaml", "resources:")
		hubRender(t, repo.Dir)
		fixed := repo.Push(t, "fix backend")
		a.waitApplied(2*time.Minute, fixed)
	})
}

// assertCreatedAfterAvailable checks that Deployment ns/name was created no
// earlier than Deployment depNS/depName became Available, and no earlier
// than unit depUnit became Ready in the agent's status.
func assertCreatedAfterAvailable(t *testing.T, k client.Client, st *status.ClusterStatus, ns, name, depNS, depName, depUnit string) {
	t.Helper()
	d, err := getDeployment(t, k, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	dep, err := getDeployment(t, k, depNS, depName)
	if err != nil {
		t.Fatal(err)
	}
	avail, since := deploymentAvailable(dep)
	if !avail {
		t.Fatalf("%s/%s not available", depNS, depName)
	}
	created := d.CreationTimestamp.Time
	// API timestamps have a one-second resolution.
	if created.Before(since.Truncate(time.Second)) {
		t.Errorf("%s/%s created at %s, before its dependency %s/%s was Available at %s", ns, name, created, depNS, depName, since)
	}
	ready := condOf(unitOf(st, depUnit).Conditions, status.ConditionReady).LastTransitionTime.Time
	if created.Before(ready.Truncate(time.Second)) {
		t.Errorf("%s/%s created at %s, before unit %s was Ready at %s", ns, name, created, depUnit, ready)
	}
	t.Logf("%s/%s created %s; %s/%s Available %s, unit %s Ready %s", ns, name, created.Format(time.RFC3339), depNS, depName, since.Format(time.RFC3339), depUnit, ready.Format(time.RFC3339))
}

func assertPodsOnKwok(t *testing.T, k client.Client, ns string, selector map[string]string, want int) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k.List(testCtx(t), pods, client.InNamespace(ns), client.MatchingLabels(selector)); err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if !strings.HasPrefix(p.Spec.NodeName, "kwok-node-") {
			t.Errorf("pod %s/%s on node %q", ns, p.Name, p.Spec.NodeName)
		}
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	if running < want {
		t.Errorf("%s %v: %d running pods, want %d", ns, selector, running, want)
	}
}

func readStatusFile(a *inprocAgent) (*status.ClusterStatus, error) {
	return reconcileReadStatus(a.spec.cacheDir)
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// agentLog holds the agent's JSON log records: message → unit → times.
type agentLog map[string]map[string][]time.Time

func agentEvents(t *testing.T, logs string) agentLog {
	t.Helper()
	out := agentLog{}
	for _, line := range strings.Split(logs, "\n") {
		var rec struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
			Unit string    `json:"unit"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Unit == "" {
			continue
		}
		if out[rec.Msg] == nil {
			out[rec.Msg] = map[string][]time.Time{}
		}
		out[rec.Msg][rec.Unit] = append(out[rec.Msg][rec.Unit], rec.Time)
	}
	return out
}

func (l agentLog) first(msg, unit string) (time.Time, bool) {
	ts := l[msg][unit]
	if len(ts) == 0 {
		return time.Time{}, false
	}
	return ts[0], true
}

// assertCorrectedByNextCycle checks that drift made at since was corrected
// by the cycle running at since or by the next one, whatever their
// durations: cycles run one after the other, so the second cycle to finish
// after since started after it and saw the drift. It waits (generously)
// for that second cycle's log record. The order of cycles, not a duration,
// is what proves "within an interval" on a machine of any speed.
func assertCorrectedByNextCycle(t *testing.T, since time.Time, logs func() string) {
	t.Helper()
	var cycles []cycleRecord
	waitFor(t, 2*time.Minute, "two cycles to finish after the edit", func() (bool, string) {
		cycles = cyclesAfter(logs(), since)
		return len(cycles) >= 2, fmt.Sprintf("%d cycles finished", len(cycles))
	})
	for _, c := range cycles[:2] {
		if c.DriftCorrected > 0 {
			return
		}
	}
	t.Errorf("neither of the two cycles that finished after the edit at %s corrected drift: %+v", since.Format(time.StampMilli), cycles[:2])
}

// cycleRecord is the agent's "cycle finished" log record.
type cycleRecord struct {
	Time           time.Time `json:"time"`
	Msg            string    `json:"msg"`
	DriftCorrected int       `json:"driftCorrected"`
}

// cyclesAfter returns the cycles logged after since, in order.
func cyclesAfter(logs string, since time.Time) []cycleRecord {
	var out []cycleRecord
	for _, line := range strings.Split(logs, "\n") {
		var rec cycleRecord
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "cycle finished" || !rec.Time.After(since) {
			continue
		}
		out = append(out, rec)
	}
	return out
}
