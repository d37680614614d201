package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// TestRolloutAbortAfterAFailedRevision: v2 fails to apply on the canary
// and stays there; the fix v3 starts a new rollout from a canary on the
// failed v2, goes Ready and reaches b2 (c3, the last wave, keeps v1).
// Abort returns a1 and b2 to v1, their last revision Ready there, with
// real agents reporting through Git: the canary does not get the failed
// v2 back, and abort says which unit each cluster gets.
func TestRolloutAbortAfterAFailedRevision(t *testing.T) {
	cs := testenv.StartClusters(t, 3, testenv.ClusterOptions{Mode: testenv.Minimal})
	srv := newGitServer(t)
	dir := t.TempDir()
	files := bakeFiles(0)
	files["clusters/c3.yaml"] = "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: c3\n"
	files["fleets/prod.yaml"] = strings.Replace(strings.Replace(files["fleets/prod.yaml"], "[a1, b2]", "[a1, b2, c3]", 1),
		"      - {name: canary, clusters: [a1]}\n", "      - {name: canary, clusters: [a1]}\n      - {name: second, clusters: [b2]}\n", 1)
	treefile.Write(t, dir, files)
	hubRender(t, dir)
	repo := fleetrepo.New(t, srv, waveRepo, dir)
	a1 := startWaveAgent(t, repo, "a1", cs[0])
	b2 := startWaveAgent(t, repo, "b2", cs[1])
	c3 := startWaveAgent(t, repo, "c3", cs[2])
	for _, a := range []*waveAgent{a1, b2, c3} {
		a.waitVersion(t, "web", "v1")
		setAvailable(t, a.cluster, true)
	}
	hash := func(cluster string) string {
		t.Helper()
		s, err := slice.Read(dir, cluster)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range s.Units {
			if u.Name == "web" {
				return u.Hash
			}
		}
		t.Fatalf("%s has no unit web", cluster)
		return ""
	}
	v1 := hash("a1")
	waitFor(t, 3*time.Minute, "a1 Ready at v1", func() (bool, string) {
		_, c := canary(t, repo)
		return c.Phase == rollout.PhaseReady, fmt.Sprintf("%+v", c)
	})

	// v2: the API server refuses its Service; a1 keeps failing on it.
	repo.Write(t, "apps/web/manifests/svc.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports: [{port: 99999}]\n")
	repo.Write(t, "apps/web/manifests/cm.yaml", waveConfigMap("web", "v2"))
	hubRender(t, repo.Dir)
	repo.Push(t, "web v2, broken")
	v2 := hash("a1")
	waitFor(t, 3*time.Minute, "a1 to report v2 Failed", func() (bool, string) {
		_, c := canary(t, repo)
		return c.Phase == rollout.PhaseFailed, fmt.Sprintf("%+v", c)
	})

	// The fix, v3, over the failed v2: a new rollout that still keeps v1.
	repo.Remove(t, "apps/web/manifests/svc.yaml")
	repo.Write(t, "apps/web/manifests/cm.yaml", waveConfigMap("web", "v3"))
	hubRender(t, repo.Dir)
	repo.Push(t, "web v3, the fix")
	st, err := fleetrender.CommittedAt(dir).State("web")
	if err != nil || st == nil || st.Previous["a1"] != v2 || len(st.Earlier["a1"]) == 0 || st.Earlier["a1"][0] != v1 {
		t.Fatalf("the fix's rollout state: %+v %v; want a1's v2 in previous and v1 in earlier", st, err)
	}
	a1.waitVersion(t, "web", "v3")
	repo.Push(t, advanceUntilReleased(t, repo))
	b2.waitVersion(t, "web", "v3")
	if v, _ := c3.liveVersion(t, "web"); v != "v1" {
		t.Fatalf("web on c3 is %s before its wave", v)
	}

	out, code := hubRun(t, "rollout", "abort", "web", "--repo", dir, "--status-repo", srv.RepoPath(waveRepo))
	short := strings.TrimPrefix(v1, "sha256:")[:12]
	if code != 0 || !strings.Contains(out, "a1 gets unit "+short+" (its last unit Ready there)") ||
		!strings.Contains(out, "b2 gets unit "+short+" (its last unit Ready there)") {
		t.Fatalf("abort: exit %d, want a1 and b2 back on v1 (%s):\n%s", code, short, out)
	}
	repo.Push(t, "abort web")
	a1.waitVersion(t, "web", "v1")
	b2.waitVersion(t, "web", "v1")
	waitFor(t, 3*time.Minute, "a1 Ready on v1 again", func() (bool, string) {
		p, c := canary(t, repo)
		return p.Aborted && c.Phase == rollout.PhaseReady, fmt.Sprintf("%+v", p)
	})
	if err := a1.cluster.Client().Get(context.Background(), client.ObjectKey{Namespace: "web", Name: "web"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("a1 has the failed v2's Service after abort (or the API failed): %v", err)
	}
}
