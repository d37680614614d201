package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// TestAgentSuspend: `suspend: true` on an Application reaches the agent
// through the rendered slice. While suspended, a change in Git (a new
// color, a ConfigMap removed from the source) is neither applied nor
// pruned, a hand edit is not corrected, and the agent's status reports
// the unit Suspended; unsuspending applies the change and prunes.
func TestAgentSuspend(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	srv := agentGit(t)
	const cluster, ns, agentNS = "suspend", "suspend-app", "flotilla-suspend"
	dir := t.TempDir()
	files := oneClusterFleet(cluster, "    - name: "+ns+"\n")
	files["apps/web/app.yaml"] = fleetApp(cluster, "web", ns, "manifests", "manifests")
	files["apps/web/manifests/settings.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n"
	files["apps/web/manifests/extra.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  keep: me\n"
	treefile.Write(t, dir, files)
	hubRender(t, dir)
	repo := fleetrepo.New(t, srv, cluster, dir)
	if err := c.CreateNamespace(testCtx(t), agentNS); err != nil {
		t.Fatal(err)
	}
	creds := agentUser(t, srv, cluster)
	p := startAgentProc(t, c, repo, cluster, agentNS, "suspend", t.TempDir(), creds, "--interval", "2s")
	rev1 := repo.Head()
	p.waitStatus(3*time.Minute, "the first revision applied", func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == rev1 && allUnitsReady(st)
	})
	waitColor(t, k, ns, "blue", time.Minute)

	// Suspend: the slice says so.
	repo.Edit(t, "apps/web/app.yaml", "  namespace: "+ns+"\n", "  namespace: "+ns+"\n  suspend: true\n")
	hubRender(t, dir)
	if s, err := slice.Read(dir, cluster); err != nil || !unitSuspended(s, "web") {
		t.Fatalf("slice after suspending: %+v %v", s, err)
	}
	rev2 := repo.Push(t, "suspend web")
	p.waitStatus(2*time.Minute, "web Suspended at "+rev2, func(st *status.ClusterStatus) bool {
		u := unitOf(st, "web")
		return st.FetchedRevision == rev2 && u != nil && u.Suspended
	})

	// A change in Git while suspended: green, and extra leaves the source.
	repo.Write(t, "apps/web/manifests/settings.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: green\n")
	repo.Remove(t, "apps/web/manifests/extra.yaml")
	hubRender(t, dir)
	rev3 := repo.Push(t, "web: green, no extra")
	st := p.waitStatus(2*time.Minute, "web still Suspended at "+rev3, func(st *status.ClusterStatus) bool {
		u := unitOf(st, "web")
		return st.FetchedRevision == rev3 && u != nil && u.Suspended
	})
	u := unitOf(st, "web")
	ready := condOf(u.Conditions, status.ConditionReady)
	if u.AppliedRevision != rev1 || ready == nil || ready.Reason != status.ReasonSuspended {
		t.Errorf("suspended unit: applied %s, Ready %+v; want applied %s and reason %s", u.AppliedRevision, ready, rev1, status.ReasonSuspended)
	}
	// The status commit says so, and so does the hub's fleet view
	// (`flotilla status`).
	waitFor(t, 2*time.Minute, "flotilla status to show web Suspended", func() (bool, string) {
		v, err := fleetview.Read(testCtx(t), fleetview.ReadOptions{Repo: srv.RepoPath(cluster), Branch: "main", Clusters: []string{cluster}})
		if err != nil {
			return false, err.Error()
		}
		if len(v.Clusters) != 1 {
			return false, fmt.Sprint(len(v.Clusters), " clusters")
		}
		cv := v.Clusters[0]
		return strings.Join(cv.SuspendedUnits, ",") == "web" && strings.HasPrefix(cv.Reason, "Suspended: web"), fmt.Sprintf("%s %q %v", cv.State, cv.Reason, cv.SuspendedUnits)
	})

	// A hand edit while suspended is not corrected either.
	editColor(t, k, ns, "red")
	cycles := p.countLogs("cycle finished")
	waitFor(t, time.Minute, "two more cycles", func() (bool, string) {
		n := p.countLogs("cycle finished")
		return n >= cycles+2, fmt.Sprint("cycles so far: ", n)
	})
	waitColor(t, k, ns, "red", time.Second)
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "extra"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("extra while suspended: %v; want it kept", err)
	}

	// Unsuspend: the change is applied and extra pruned.
	repo.Edit(t, "apps/web/app.yaml", "  suspend: true\n", "")
	hubRender(t, dir)
	rev4 := repo.Push(t, "resume web")
	p.waitStatus(2*time.Minute, "applied at "+rev4, func(st *status.ClusterStatus) bool {
		u := unitOf(st, "web")
		return st.AppliedRevision == rev4 && allUnitsReady(st) && u != nil && !u.Suspended
	})
	waitColor(t, k, ns, "green", time.Minute)
	waitFor(t, time.Minute, "extra pruned", func() (bool, string) {
		err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "extra"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), "get extra: " + errText(err)
	})
}

func unitSuspended(s *slice.Slice, name string) bool {
	for _, u := range s.Units {
		if u.Name == name {
			return u.Suspend
		}
	}
	return false
}

func errText(err error) string {
	if err == nil {
		return "found"
	}
	return err.Error()
}
