package demo_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/test/demo"
)

// TestDemo is `make demo`'s scenario: the template fleet, pushed to a local
// Git server, gets in sync on three full clusters through their agents;
// `flotilla status` shows it; stopping leaves no process behind.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three full clusters")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var out bytes.Buffer
	f, err := demo.Start(ctx, demo.Options{Out: &out, Interval: 20 * time.Second})
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out.String())
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = f.Stop()
		}
	}()
	view, err := f.WaitInSync(ctx, 10*time.Minute)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, out.String())
	}
	for _, c := range view.Clusters {
		if c.State != fleetview.StateInSync || c.UnitsTotal == 0 || c.UnitsReady != c.UnitsTotal || c.AppliedRevision == "" {
			t.Errorf("cluster %s: %+v", c.Name, c)
		}
	}
	table, err := f.StatusTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range demo.Clusters {
		if !strings.Contains(table, name) {
			t.Errorf("status table lacks %s:\n%s", name, table)
		}
	}
	if got := strings.Count(table, string(fleetview.StateInSync)); got < len(demo.Clusters) {
		t.Errorf("status table shows %d InSync, want %d:\n%s", got, len(demo.Clusters), table)
	}
	t.Logf("progress:\n%s\n%s", out.String(), table)

	// The template's GlobalJob: gang-scheduled by Volcano on member1's GPU
	// node, run to completion, reported through Git.
	job, err := f.WaitJobCompleted(ctx, demo.DemoJobCluster, demo.DemoJob, 5*time.Minute)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, out.String())
	}
	if job.Succeeded != 3 || job.Namespace != "ml" {
		t.Errorf("job %s: %d pods succeeded in %q, want 3 in ml: %+v", demo.DemoJob, job.Succeeded, job.Namespace, job)
	}
	// The dashboard the demo prints answers, from Git alone, with every
	// cluster and the job's row. It reads the fleet every 5s: wait for the
	// read that follows the job's completion.
	var page, jobRow string
	for !strings.Contains(jobRow, "Completed") {
		page = dashboardPage(ctx, t, f.DashboardURL)
		jobRow = rowOf(page, `data-job="`)
		select {
		case <-ctx.Done():
			t.Fatalf("the dashboard at %s never showed the job Completed:\n%s", f.DashboardURL, page)
		case <-time.After(time.Second):
		}
	}
	if !strings.Contains(jobRow, demo.DemoJob) || !strings.Contains(jobRow, demo.DemoJobCluster) {
		t.Errorf("the dashboard's job row does not name %s on %s: %s", demo.DemoJob, demo.DemoJobCluster, jobRow)
	}
	for _, want := range append([]string{"InSync"}, demo.Clusters...) {
		if !strings.Contains(page, want) {
			t.Errorf("the dashboard at %s lacks %q", f.DashboardURL, want)
		}
	}
	jobs, err := f.Run(ctx, "", f.Flotilla(), f.StatusArgs("jobs")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(jobs, demo.DemoJob) || !strings.Contains(jobs, "Completed") {
		t.Errorf("flotilla status jobs does not show %s Completed:\n%s", demo.DemoJob, jobs)
	}
	gpus := 0
	pods := &corev1.PodList{}
	if err := f.Cluster(demo.DemoJobCluster).Client().List(ctx, pods, client.InNamespace("ml")); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.SchedulerName != "volcano" {
			t.Errorf("pod %s scheduled by %q, want volcano", p.Name, p.Spec.SchedulerName)
		}
		if _, wantsGPU := p.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; wantsGPU {
			gpus++
			if !strings.Contains(p.Spec.NodeName, "-gpu") {
				t.Errorf("GPU worker %s ran on %q, not on the GPU node", p.Name, p.Spec.NodeName)
			}
		}
	}
	if gpus != 2 {
		t.Errorf("%d GPU workers in namespace ml, want 2", gpus)
	}

	// What the demo tells the user to try: edit, render, plan, push.
	app := filepath.Join(f.CloneDir, "apps", "nginx", "app.yaml")
	b, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "replicas: 4", "replicas: 8", 1)
	if edited == string(b) {
		t.Fatal("apps/nginx/app.yaml has no \"replicas: 4\" to edit")
	}
	if err := os.WriteFile(app, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Run(ctx, f.CloneDir, f.Flotilla(), "render"); err != nil {
		t.Fatal(err)
	}
	plan, err := f.Run(ctx, f.CloneDir, f.Flotilla(), "plan", "--base", "origin/main")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("flotilla plan: want exit 1 (changes), got %v\n%s", err, plan)
	}
	if !strings.Contains(plan, "member1 3→6") || !strings.Contains(plan, "member2 1→2") {
		t.Errorf("plan does not say the new division in words:\n%s", plan)
	}
	commitPush(ctx, t, f, "Scale nginx")
	if _, err := f.WaitInSync(ctx, 5*time.Minute); err != nil {
		t.Fatalf("after the push: %v\n%s", err, out.String())
	}
	for name, want := range map[string]int32{"member1": 6, "member2": 2} {
		d := &appsv1.Deployment{}
		if err := f.Cluster(name).Client().Get(ctx, client.ObjectKey{Namespace: "web", Name: "nginx"}, d); err != nil {
			t.Fatal(err)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != want || d.Status.AvailableReplicas != want {
			t.Errorf("%s: nginx has %v replicas, %d available; want %d", name, d.Spec.Replicas, d.Status.AvailableReplicas, want)
		}
	}

	// A change that travels the fleet wave by wave: iot-collector gets a
	// rollout (member1 first), then a change; member1 runs it, the others
	// keep the old Deployment until `flotilla rollout advance` releases
	// the next wave.
	if err := demo.AddRollout(f.CloneDir); err != nil {
		t.Fatal(err)
	}
	// The declaration goes in its own commit: the rollout holds later
	// waves on the content rendered with it.
	if _, err := f.Run(ctx, f.CloneDir, f.Flotilla(), "render"); err != nil {
		t.Fatal(err)
	}
	commitPush(ctx, t, f, "iot-collector: roll out to member1 first")
	if err := demo.EditCollectorCPU(f.CloneDir, "20m"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Run(ctx, f.CloneDir, f.Flotilla(), "render"); err != nil {
		t.Fatal(err)
	}
	commitPush(ctx, t, f, "iot-collector: more CPU, canary first")
	if _, err := f.WaitInSync(ctx, 5*time.Minute); err != nil {
		t.Fatalf("after the rollout's first wave: %v\n%s", err, out.String())
	}
	collectorCPU := func(cluster string) string {
		d := &appsv1.Deployment{}
		if err := f.Cluster(cluster).Client().Get(ctx, client.ObjectKey{Namespace: "iot", Name: "iot-collector"}, d); err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String()
	}
	for cluster, want := range map[string]string{"member1": "20m", "member2": "10m", "edge-1": "10m"} {
		if got := collectorCPU(cluster); got != want {
			t.Errorf("wave 1: iot-collector on %s requests cpu %s, want %s", cluster, got, want)
		}
	}
	// The rollout commands read the agents' status refs from the clone's
	// remote-tracking refs, as the template's CI job does after its fetch.
	fetch := func() {
		if _, err := f.Run(ctx, f.CloneDir, "git", "fetch", "-q", "origin"); err != nil {
			t.Fatal(err)
		}
	}
	fetch()
	rolloutStatus, err := f.Run(ctx, f.CloneDir, f.Flotilla(), "rollout", "status", "iot-collector")
	if err != nil || !strings.Contains(rolloutStatus, "canary") {
		t.Errorf("flotilla rollout status: %v\n%s", err, rolloutStatus)
	}
	// advance exits 1 until member1 has reported the unit Ready for the
	// bake time; then it releases the rest.
	var advanced string
	for advanced == "" {
		fetch()
		msg, err := f.Run(ctx, f.CloneDir, f.Flotilla(), "rollout", "advance")
		if err == nil {
			advanced = msg
			break
		}
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("flotilla rollout advance: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rollout advance released nothing: %v\n%s", err, msg)
		case <-time.After(3 * time.Second):
		}
	}
	commitPush(ctx, t, f, advanced)
	if _, err := f.WaitInSync(ctx, 5*time.Minute); err != nil {
		t.Fatalf("after rollout advance: %v\n%s", err, out.String())
	}
	for _, cluster := range demo.Clusters {
		if got := collectorCPU(cluster); got != "20m" {
			t.Errorf("after advance: iot-collector on %s requests cpu %s, want 20m", cluster, got)
		}
	}

	pids := f.PIDs()
	if len(pids) < 3*6 {
		t.Errorf("%d processes, want an agent and at least 5 components per cluster", len(pids))
	}
	stopped = true
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		// Signal 0 probes: only a process that still exists (not a zombie
		// reaped by us) accepts it.
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still runs after Stop", pid)
		}
	}
}

// commitPush commits everything in the demo's clone and pushes it.
func commitPush(ctx context.Context, t *testing.T, f *demo.Fleet, message string) {
	t.Helper()
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", message}, {"push", "-q"}} {
		if _, err := f.Run(ctx, f.CloneDir, "git", args...); err != nil {
			t.Fatal(err)
		}
	}
}

// dashboardPage GETs the dashboard's page; "" while it answers otherwise.
func dashboardPage(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Logf("dashboard: %v", err)
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Logf("dashboard: %s, %v", resp.Status, err)
		return ""
	}
	return string(body)
}

// rowOf is the table row of page that holds attr ("" if none).
func rowOf(page, attr string) string {
	i := strings.Index(page, attr)
	if i < 0 {
		return ""
	}
	start := strings.LastIndex(page[:i], "<tr")
	end := strings.Index(page[i:], "</tr>")
	if start < 0 || end < 0 {
		return ""
	}
	return page[start : i+end]
}
