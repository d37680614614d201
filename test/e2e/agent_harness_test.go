package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/agent/metrics"
	"github.com/flotilla-gitops/flotilla/agent/reconcile"
	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// ---- fleet repositories ----

func hubRender(t *testing.T, dir string) {
	t.Helper()
	root := hubcmd.NewRootCommand()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"render", "--repo", dir})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("flotilla render: %v\n%s%s", err, out.String(), errb.String())
	}
}

// templateBatchFiles are the template's Volcano parts (its GPU fleet with
// queues, and the GlobalJob), which need Volcano on the cluster: the demo's
// clusters run it, the agent tests' shared cluster does not.
var templateBatchFiles = []string{"fleets/gpu.yaml", "jobs"}

// copyTemplate copies fleet-repo-template into a temporary directory,
// without templateBatchFiles (the caller renders the copy again).
func copyTemplate(t *testing.T) string {
	t.Helper()
	src := filepath.Join(agentproc.ModuleRoot(), "fleet-repo-template")
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if slices.Contains(templateBatchFiles, filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// handUnit is a unit of a hand-written slice.
type handUnit struct {
	name      string
	kind      slice.UnitKind
	files     map[string]string // unit-dir-relative path → content
	helm      *slice.HelmRelease
	dependsOn []string
	wait      bool
	namespace string
	timeout   time.Duration // default 2m
	// waitForTimeout and healthChecks: see slice.Unit.
	waitForTimeout bool
	healthChecks   []slice.HealthCheck
}

// writeHandSlice writes rendered/<bucket>/<cluster>/ with slice.yaml and
// the units' files into dir. Unit hashes cover the unit files.
func writeHandSlice(t *testing.T, dir, cluster string, units []handUnit) {
	t.Helper()
	s := slice.Slice{APIVersion: slice.APIVersion, Kind: slice.Kind, Cluster: cluster}
	for _, u := range units {
		unitDir := slice.UnitDir(cluster, u.name)
		var files []slice.File
		for _, p := range slices.Sorted(maps.Keys(u.files)) {
			full := filepath.Join(dir, filepath.FromSlash(unitDir), filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(u.files[p]), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, slice.File{Name: p, Data: []byte(u.files[p])})
		}
		kind := u.kind
		if kind == "" {
			kind = slice.UnitKustomize
		}
		timeout := u.timeout
		if timeout == 0 {
			timeout = 2 * time.Minute
		}
		su := slice.Unit{
			Name: u.name, Kind: kind, Path: unitDir, Helm: u.helm, DependsOn: u.dependsOn,
			Prune: true, Wait: u.wait, Timeout: metav1.Duration{Duration: timeout},
			Namespace: u.namespace, Hash: slice.UnitHash(files, ""),
			WaitForTimeout: u.waitForTimeout, HealthChecks: u.healthChecks,
		}
		if su.Helm != nil {
			su.Helm.Values = slice.UnitDir(cluster, u.name) + "/values.yaml"
		}
		s.Units = append(s.Units, su)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("hand-written slice: %v", err)
	}
	p := filepath.Join(dir, filepath.FromSlash(slice.SlicePath(cluster)))
	if err := os.WriteFile(p, slice.Marshal(&s), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := slice.Read(dir, cluster); err != nil {
		t.Fatalf("hand-written slice does not read back: %v", err)
	}
}

// ---- the agent, in process ----

// agentSpec configures an in-process agent.
type agentSpec struct {
	cluster  string
	repo     *fleetrepo.Repo
	cacheDir string // default: a new temporary directory
	// namespace for inventories; created when missing.
	namespace     string
	interval      time.Duration
	renderTimeout time.Duration
	workers       int
}

// inprocAgent is the agent's loop wired like the binary does, in process
// (test/agentproc).
type inprocAgent struct {
	t       *testing.T
	spec    agentSpec
	run     *agentproc.InProcess
	loop    *reconcile.Loop
	applier *apply.Applier
	logs    *agentproc.Buffer
	metrics *metrics.Metrics
}

// agentUser adds the cluster's agent user to the repo's server and returns
// its credentials directory.
func agentUser(t *testing.T, srv *gitserver.Server, cluster string) string {
	t.Helper()
	user := gitserver.AgentUser(cluster)
	password := user + "-secret"
	if err := srv.AddUser(user, password, gitserver.AgentRule(cluster)); err != nil {
		t.Fatal(err)
	}
	return agentproc.CredentialsDir(t, user, password)
}

func newInprocAgent(t *testing.T, c *testenv.Cluster, spec agentSpec) *inprocAgent {
	t.Helper()
	if spec.cacheDir == "" {
		spec.cacheDir = t.TempDir()
	}
	if spec.namespace == "" {
		spec.namespace = "flotilla-" + spec.cluster
	}
	if spec.interval == 0 {
		spec.interval = 3 * time.Second
	}
	creds := agentUser(t, spec.repo.Server, spec.cluster)
	auth, err := gitrepo.LoadAuth(creds)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 200, 400
	counter := &apply.WriteCounter{}
	counter.Wrap(cfg)
	m := metrics.New()
	m.CountAPIRequests(counter)
	run := agentproc.NewInProcess(t, c, agentproc.InProcessOptions{
		Cluster: spec.cluster, RepoURL: spec.repo.URL, Auth: auth,
		CacheDir: spec.cacheDir, Namespace: spec.namespace,
		RESTConfig: cfg, Discovery: true, Metrics: m,
		Interval: spec.interval, Workers: spec.workers, RenderTimeout: spec.renderTimeout,
	})
	return &inprocAgent{t: t, spec: spec, run: run, loop: run.Loop, applier: run.Applier, logs: run.Logs, metrics: m}
}

// gauge reads an unlabelled gauge or counter from the agent's registry
// (false when the registry has no such series).
func (a *inprocAgent) gauge(name string) (float64, bool) {
	a.t.Helper()
	fams, err := a.metrics.Registry().Gather()
	if err != nil {
		a.t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			m := f.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// start runs the loop in the background.
func (a *inprocAgent) start() { a.run.Start() }

// stop ends the loop and waits for it.
func (a *inprocAgent) stop() { a.run.Stop() }

// cycle runs one cycle synchronously (the loop must not be running).
func (a *inprocAgent) cycle() *status.ClusterStatus {
	a.t.Helper()
	st, err := a.loop.Cycle(testCtx(a.t))
	a.t.Logf("cycle: revision %s applied %s error %v", st.FetchedRevision, st.AppliedRevision, err)
	return st
}

// waitStatus polls the loop's status until cond holds.
func (a *inprocAgent) waitStatus(timeout time.Duration, what string, cond func(*status.ClusterStatus) bool) *status.ClusterStatus {
	a.t.Helper()
	var last *status.ClusterStatus
	waitFor(a.t, timeout, what, func() (bool, string) {
		last = a.loop.Status()
		if last == nil {
			return false, "no status yet"
		}
		return cond(last), describeStatus(last)
	})
	return last
}

// waitApplied waits until every unit is Ready at revision.
func (a *inprocAgent) waitApplied(timeout time.Duration, revision string) *status.ClusterStatus {
	a.t.Helper()
	return a.waitStatus(timeout, "every unit Ready at "+revision, func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == revision && allUnitsReady(st)
	})
}

// installOpenCRD installs the CustomResourceDefinition of a kind whose
// objects may hold any fields, as the cluster's own (not a unit's), and
// waits until it is Established.
func installOpenCRD(t *testing.T, c *testenv.Cluster, gvk schema.GroupVersionKind, plural string, scope apiextensionsv1.ResourceScope) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: gvk.Kind, Plural: plural, Singular: strings.ToLower(gvk.Kind)},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvk.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTo(true),
				}},
			}},
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.ApplyCRDs(ctx, crd); err != nil {
		t.Fatal(err)
	}
}

// ---- status helpers ----

func unitOf(st *status.ClusterStatus, name string) *status.UnitStatus {
	for i := range st.Units {
		if st.Units[i].Name == name {
			return &st.Units[i]
		}
	}
	return nil
}

func condOf(conds []metav1.Condition, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(conds, typ)
}

func unitIsReady(u *status.UnitStatus) bool {
	if u == nil {
		return false
	}
	c := condOf(u.Conditions, status.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

func allUnitsReady(st *status.ClusterStatus) bool {
	if len(st.Units) == 0 {
		return false
	}
	for i := range st.Units {
		if !unitIsReady(&st.Units[i]) {
			return false
		}
	}
	return true
}

func describeStatus(st *status.ClusterStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "desired=%s fetched=%s applied=%s lastError=%q\n", st.DesiredRevision, st.FetchedRevision, st.AppliedRevision, st.LastError)
	for _, u := range st.Units {
		c := condOf(u.Conditions, status.ConditionReady)
		reason := "-"
		if c != nil {
			reason = string(c.Status) + "/" + c.Reason
		}
		fmt.Fprintf(&b, "  %s %s rev=%s objects=%d drift=%d err=%q", u.Name, reason, u.AppliedRevision, u.Objects, u.DriftCorrections, u.LastError)
		if w := status.UnitWaiting(u); w != "" {
			fmt.Fprintf(&b, " reconciling=%q", w)
		}
		b.WriteByte('\n')
	}
	if st.Progress != nil {
		fmt.Fprintf(&b, "  cycle in progress: %s\n", st.Progress)
	}
	return b.String()
}

// ---- waiting ----

// waitFor polls cond every 200ms until it holds or timeout passes; then the
// test fails with cond's last detail.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	detail := ""
	for {
		var ok bool
		ok, detail = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state:\n%s", timeout, what, detail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// ---- cluster helpers ----

func getDeployment(t *testing.T, k client.Client, ns, name string) (*appsv1.Deployment, error) {
	t.Helper()
	d := &appsv1.Deployment{}
	err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: name}, d)
	return d, err
}

func deploymentAvailable(d *appsv1.Deployment) (bool, time.Time) {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return d.Status.ObservedGeneration >= d.Generation, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// managedObjects lists the objects carrying flotilla's managed-by label in
// namespace ns, as Kind/namespace/name → unit.
func managedObjects(t *testing.T, k client.Client, namespaces ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	sel := client.MatchingLabels{apply.LabelManagedBy: apply.ManagedByValue}
	for _, ns := range namespaces {
		lists := []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.ServiceAccountList{}}
		for _, l := range lists {
			if err := k.List(testCtx(t), l, client.InNamespace(ns), sel); err != nil {
				t.Fatal(err)
			}
			items, err := apimeta.ExtractList(l)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				o := it.(client.Object)
				kind := strings.TrimSuffix(fmt.Sprintf("%T", l), "List")
				kind = kind[strings.LastIndex(kind, ".")+1:]
				out[kind+"/"+o.GetNamespace()+"/"+o.GetName()] = o.GetLabels()[apply.LabelUnit]
			}
		}
	}
	return out
}

func reconcileReadStatus(cacheDir string) (*status.ClusterStatus, error) {
	return agentproc.ReadStatus(cacheDir)
}
