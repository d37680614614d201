package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// bake is long enough that an advance run as soon as the canary reports
// the new revision Ready would come well inside it.
const bake = 20 * time.Second

// bakeFiles: web, a ConfigMap and a Deployment, rolls out to a1 first and
// then to b2, with bake. Nothing in these clusters runs the Deployment:
// the test writes its status, which makes the unit Ready or not.
func bakeFiles(bake time.Duration) map[string]string {
	files := map[string]string{
		"fleets/prod.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Fleet
metadata:
  name: prod
spec:
  clusters: [a1, b2]
  namespaces: [{name: web}]
  rollout:
    bake: ` + bake.String() + `
    waves:
      - {name: canary, clusters: [a1]}
`,
		"apps/web/app.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: Application
metadata:
  name: web
spec:
  source: {manifests: {path: manifests}}
  namespace: web
  timeout: 5s
  syncPolicies: [{destination: {fleet: prod}}]
`,
		"apps/web/manifests/cm.yaml":     waveConfigMap("web", "v1"),
		"apps/web/manifests/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: example.invalid/web:1}]}\n",
	}
	for _, c := range []string{"a1", "b2"} {
		files["clusters/"+c+".yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + c + "\n"
	}
	return files
}

// setAvailable writes the Deployment's status as its controller would: all
// replicas available (kstatus Current) or none.
func setAvailable(t *testing.T, c *testenv.Cluster, available bool) {
	t.Helper()
	ctx := context.Background()
	var d appsv1.Deployment
	waitFor(t, 2*time.Minute, "Deployment web/web to exist", func() (bool, string) {
		err := c.Client().Get(ctx, client.ObjectKey{Namespace: "web", Name: "web"}, &d)
		return err == nil, fmt.Sprint(err)
	})
	n := int32(0)
	if available {
		n = 1
	}
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: n, AvailableReplicas: n, UnavailableReplicas: 1 - n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: "False", Reason: "MinimumReplicasUnavailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: "True", Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		},
	}
	if available {
		d.Status.Conditions[0].Status, d.Status.Conditions[0].Reason = "True", "MinimumReplicasAvailable"
	}
	if err := c.Client().Status().Update(ctx, &d); err != nil {
		t.Fatalf("Deployment status: %v", err)
	}
}

// canary is a1's progress with web's rollout as rollout status reads it
// from the status refs.
func canary(t *testing.T, r *fleetrepo.Repo) (rollout.Progress, rollout.ClusterProgress) {
	t.Helper()
	p := waveProgress(t, r, "web")
	return p, p.Waves[0].Clusters[0]
}

// advanceUntilReleased runs rollout advance, as a CI job would on every
// status push, until it releases a wave, and returns its message.
func advanceUntilReleased(t *testing.T, r *fleetrepo.Repo) string {
	t.Helper()
	var out string
	waitFor(t, 4*time.Minute, "rollout advance to release the next wave", func() (bool, string) {
		var code int
		out, code = hubRun(t, "rollout", "advance", "--repo", r.Dir, "--status-repo", r.Server.RepoPath(waveRepo))
		if code != 0 && code != 1 {
			t.Fatalf("rollout advance: exit %d\n%s", code, out)
		}
		return code == 0, out
	})
	return out
}

// measured matches the canary's measured time in advance's message.
var measured = regexp.MustCompile(`a1 \(Ready at the revision for ([0-9hms.]+), since ([0-9TZ:-]+)\)`)

// TestRolloutBake: bake counts from the moment the canary is Ready at the
// new revision, not from an older Ready. A canary Ready for longer than
// bake gets a new revision: the next wave is released no earlier than the
// canary's readySince (at the new content) + bake, as the recorded times
// show, and advance states the measured time. A canary that turns
// unhealthy during bake holds the wave past that time; Ready again, it
// bakes from the start.
func TestRolloutBake(t *testing.T) {
	cs := testenv.StartClusters(t, 2, testenv.ClusterOptions{Mode: testenv.Minimal})
	srv := newGitServer(t)
	dir := t.TempDir()
	treefile.Write(t, dir, bakeFiles(bake))
	hubRender(t, dir)
	repo := fleetrepo.New(t, srv, waveRepo, dir)
	a1 := startWaveAgent(t, repo, "a1", cs[0])
	b2 := startWaveAgent(t, repo, "b2", cs[1])
	for _, a := range []*waveAgent{a1, b2} {
		a.waitVersion(t, "web", "v1")
		setAvailable(t, a.cluster, true)
	}
	// The canary has been Ready for longer than bake: the Ready
	// condition's transition time alone would let the next wave go as
	// soon as the new revision is Ready.
	var readyV1 time.Time
	waitFor(t, 3*time.Minute, "a1 Ready at v1 for longer than bake", func() (bool, string) {
		_, c := canary(t, repo)
		if c.Phase != rollout.PhaseReady || c.Since == nil {
			return false, fmt.Sprintf("%+v", c)
		}
		readyV1 = c.Since.Time
		return time.Since(readyV1) > bake+2*time.Second, fmt.Sprintf("%+v", c)
	})

	t.Run("a healthy canary bakes the new revision", func(t *testing.T) {
		repo.Write(t, "apps/web/manifests/cm.yaml", waveConfigMap("web", "v2"))
		hubRender(t, repo.Dir)
		repo.Push(t, "web v2")
		appliedA1 := a1.waitVersion(t, "web", "v2")
		out := advanceUntilReleased(t, repo)
		repo.Push(t, out)
		appliedB2 := b2.waitVersion(t, "web", "v2")

		_, c := canary(t, repo)
		if c.Phase != rollout.PhaseReady || c.Since == nil {
			t.Fatalf("a1 after the release: %+v", c)
		}
		since := c.Since.Time
		u := unitOf(a1.loop.Status(), "web")
		if u == nil || condOf(u.Conditions, status.ConditionReady) == nil {
			t.Fatalf("a1 status has no Ready unit web: %+v", u)
		}
		cond := condOf(u.Conditions, status.ConditionReady)
		t.Logf("a1: Ready condition since %s, v2 applied %s, Ready at v2 since %s; b2: v2 applied %s; advance: %s",
			cond.LastTransitionTime.UTC().Format(time.RFC3339), appliedA1.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339),
			appliedB2.UTC().Format(time.RFC3339), out)
		switch {
		case !cond.LastTransitionTime.Time.Before(since.Add(-bake)):
			t.Errorf("the Ready condition moved (%s): the test no longer shows a canary Ready before the change", cond.LastTransitionTime)
		case since.Before(appliedA1.Truncate(time.Second)):
			t.Errorf("readySince %s is before a1 applied v2 (%s): bake counted from an older Ready", since, appliedA1)
		case appliedB2.Before(since.Add(bake)):
			t.Errorf("b2 applied v2 at %s, before a1's readySince %s + bake %s", appliedB2, since, bake)
		}
		m := measured.FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, "wave rest released: every cluster of wave canary Ready at the revision for at least "+bake.String()+" (bake)") {
			t.Fatalf("advance message does not state the measured time:\n%s", out)
		}
		if d, err := time.ParseDuration(m[1]); err != nil || d < bake || m[2] != since.UTC().Format(time.RFC3339) {
			t.Errorf("advance measured %s since %s; want at least %s since %s", m[1], m[2], bake, since.UTC().Format(time.RFC3339))
		}
	})

	t.Run("a canary unhealthy during bake holds the wave", func(t *testing.T) {
		repo.Write(t, "apps/web/manifests/cm.yaml", waveConfigMap("web", "v3"))
		hubRender(t, repo.Dir)
		head := repo.Push(t, "web v3")
		a1.waitVersion(t, "web", "v3")
		var first time.Time
		waitFor(t, 3*time.Minute, "a1 Ready at v3", func() (bool, string) {
			_, c := canary(t, repo)
			if c.Phase == rollout.PhaseReady && c.Since != nil {
				first = c.Since.Time
				return true, ""
			}
			return false, fmt.Sprintf("%+v", c)
		})
		// The revision breaks some time after it became Ready.
		setAvailable(t, a1.cluster, false)
		waitFor(t, 3*time.Minute, "a1 to report web not Ready", func() (bool, string) {
			_, c := canary(t, repo)
			return c.Phase == rollout.PhaseApplied || c.Phase == rollout.PhaseFailed, fmt.Sprintf("%+v", c)
		})
		// However long it stays so, past the first readySince + bake,
		// nothing is released.
		b2.waitFetched(t, head)
		waitFor(t, 3*time.Minute, "the first readySince + bake to pass", func() (bool, string) {
			return time.Since(first) > bake+2*time.Second, ""
		})
		out, code := hubRun(t, "rollout", "advance", "--repo", repo.Dir, "--status-repo", srv.RepoPath(waveRepo))
		if code != 1 || !strings.Contains(out, "web: wave canary is not Ready: a1") {
			t.Fatalf("advance over an unhealthy canary: exit %d\n%s", code, out)
		}
		if v, _ := b2.liveVersion(t, "web"); v != "v2" {
			t.Fatalf("web on b2 is %s while the canary is unhealthy", v)
		}

		// Healthy again: the bake starts over.
		setAvailable(t, a1.cluster, true)
		out = advanceUntilReleased(t, repo)
		repo.Push(t, out)
		appliedB2 := b2.waitVersion(t, "web", "v3")
		_, c := canary(t, repo)
		if c.Phase != rollout.PhaseReady || c.Since == nil || !c.Since.Time.After(first) {
			t.Fatalf("a1 Ready again: %+v, want Ready since after %s", c, first)
		}
		if appliedB2.Before(c.Since.Time.Add(bake)) {
			t.Errorf("b2 applied v3 at %s, before a1's second readySince %s + bake %s", appliedB2, c.Since, bake)
		}
	})
}
