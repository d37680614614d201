package plan_test

import (
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/plan"
)

// gpuFleet: g1 and g2 in fleet gpu; train, a BestFit GlobalJob of two
// one-GPU workers. Capacity hints are set per test.
func gpuFleet(g1Hint, g2Hint string) map[string]string {
	cluster := func(name, hint string) string {
		s := "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + name + "\n  labels: {gpu: \"true\"}\n"
		if hint != "" {
			s += "spec:\n  capacity: {cpu: \"64\", memory: 256Gi, nvidia.com/gpu: \"" + hint + "\"}\n"
		}
		return s
	}
	return map[string]string{
		"clusters/g1.yaml": cluster("g1", g1Hint),
		"clusters/g2.yaml": cluster("g2", g2Hint),
		"fleets/gpu.yaml":  "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: gpu\nspec:\n  selector:\n    matchLabels: {gpu: \"true\"}\n  namespaces:\n    - name: ml\n",
		"jobs/train.yaml": `apiVersion: flotilla.dev/v1alpha1
kind: GlobalJob
metadata:
  name: train
spec:
  namespace: ml
  placement:
    type: BestFit
    destination: {fleet: gpu}
  template:
    minAvailable: 2
    tasks:
      - name: worker
        replicas: 2
        template:
          spec:
            restartPolicy: OnFailure
            containers:
              - name: worker
                image: busybox:1.36
                resources:
                  requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}
`,
	}
}

// placedOn names the clusters whose committed rendered/ holds unit.
func (r *testRepo) placedOn(unit string, clusters ...string) string {
	r.t.Helper()
	files := r.git("ls-files", "--", "rendered")
	var on []string
	for _, c := range clusters {
		if strings.Contains(files, "/"+c+"/"+unit+"/") {
			on = append(on, c)
		}
	}
	return strings.Join(on, ",")
}

// assertAgrees: a plan of the rendered tree against itself shows no change
// and does not call rendered/ stale, from the working tree and from the
// commit.
func assertAgrees(t *testing.T, r *testRepo, base string) {
	t.Helper()
	for _, head := range []string{"", "HEAD"} {
		p := r.plan(plan.Options{Base: base, Head: head})
		for _, w := range p.Warnings {
			if strings.Contains(w, "stale") {
				t.Errorf("head %q: plan calls the rendered tree stale: %s", head, w)
			}
		}
		if base == "HEAD" && !p.Empty() {
			t.Errorf("head %q: plan of the rendered tree against itself shows %d clusters changing", head, len(p.Clusters))
		}
	}
}

// TestPlanAgreesWithRenderOnBestFitJobs: plan compiles through render's
// pipeline, so for BestFit GlobalJobs it reads the same placements (the
// committed rendered/) and the same reported capacity (status refs).
func TestPlanAgreesWithRenderOnBestFitJobs(t *testing.T) {
	t.Run("hints only", func(t *testing.T) {
		r := newTestRepo(t, gpuFleet("2", "4"))
		if got := r.placedOn("job-train", "g1", "g2"); got != "g2" {
			t.Fatalf("render placed train on %q, want g2 (more free GPUs)", got)
		}
		// g1 now looks better, but a placed job stays where it is: render
		// changes nothing, and neither may plan.
		r.write(gpuFleet("8", "0"))
		r.render()
		r.commit("hints moved")
		if got := r.placedOn("job-train", "g1", "g2"); got != "g2" {
			t.Fatalf("after the hints moved render placed train on %q, want it to stay on g2", got)
		}
		assertAgrees(t, r, "HEAD")
		assertAgrees(t, r, "main")
	})

	t.Run("status refs", func(t *testing.T) {
		// No hints: only the clusters' reported capacity can place the job.
		r := newTestRepo(t, map[string]string{"README.md": "fleet\n"})
		status := func(cluster, gpus string) string {
			return "apiVersion: flotilla.dev/v1alpha1\nkind: ClusterStatus\ncluster: " + cluster +
				"\nagent:\n  version: test\nheartbeat: \"2025-01-01T00:00:00Z\"\ncapacity:\n  readyNodes: 1\n  free: {cpu: \"64\", memory: 256Gi, nvidia.com/gpu: \"" + gpus + "\"}\n"
		}
		for cluster, gpus := range map[string]string{"g1": "8", "g2": "1"} {
			r.git("checkout", "-q", "--orphan", "flotilla/status/"+cluster)
			r.git("rm", "-rq", "--cached", ".")
			r.git("clean", "-fdq")
			r.write(map[string]string{"status.yaml": status(cluster, gpus)})
			r.git("add", "status.yaml")
			r.git("commit", "-q", "-m", "status")
		}
		r.git("checkout", "-q", "-f", "change")
		r.git("clean", "-fdq")

		r.write(gpuFleet("", ""))
		r.render()
		r.commit("train")
		if got := r.placedOn("job-train", "g1", "g2"); got != "g1" {
			t.Fatalf("render placed train on %q, want g1 (the only cluster reporting room)", got)
		}
		assertAgrees(t, r, "HEAD")
		assertAgrees(t, r, "main")
		// Against a base without the job, plan places it where render did.
		p := r.plan(plan.Options{Base: "main", Head: "HEAD"})
		var added []string
		for _, c := range p.Clusters {
			for _, u := range c.Units {
				if u.Name == "job-train" && u.Change == plan.Added {
					added = append(added, c.Name)
				}
			}
		}
		if strings.Join(added, ",") != "g1" {
			t.Errorf("plan adds job-train on %v, want g1 as render placed it", added)
		}
	})
}
