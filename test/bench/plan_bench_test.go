package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/plan"
)

// planGoal is the goal for a one-application change over 1,000
// clusters, on the 2-core reference machine.
const planGoal = 15 * time.Second

// changedApp is a plain-manifests application sending 3 replicas to the
// production fleet. (app-00, the kustomize application the render
// benchmark edits, does not render: the generator writes its overlay's
// nameSuffix "-0" unquoted, which YAML reads as a number.)
var changedApp = AppName(4)

// BenchmarkPlan measures `flotilla plan` (the built bin/flotilla, as a
// child process) for a one-application change over a generated fleet of
// 1,000 clusters × 20 applications: main holds the rendered fleet, the
// branch "change" edits app-04 (3 → 4 replicas on the production fleet,
// a third of the clusters; plain manifests) and re-renders, as a pull
// request would. The plan must show exactly that change and render only
// the affected units.
//
//	go test -run '^$' -bench BenchmarkPlan -benchtime 1x ./test/bench
//
// FLOTILLA_BENCH_ENFORCE=1 turns a missed goal into a failure.
//
// custom-schema: the changed application's kustomization sets a custom
// OpenAPI schema, so each of its renders runs alone (render's schemaGate).
func BenchmarkPlan(b *testing.B) {
	b.Run("clusters=1000/apps=20/one-app-change", func(b *testing.B) {
		benchPlan(b, Spec{Clusters: 1000, Apps: 20})
	})
	b.Run("clusters=1000/apps=20/one-app-change/custom-schema", func(b *testing.B) {
		benchPlan(b, Spec{Clusters: 1000, Apps: 20, CustomSchema: true})
	})
}

func benchPlan(b *testing.B, spec Spec) {
	bin := planBinary(b)
	b.ResetTimer() // ns/op is the plan alone, as s/plan
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		repo := b.TempDir()
		if err := Generate(repo, spec); err != nil {
			b.Fatal(err)
		}
		planRender(b, bin, repo)
		planGit(b, repo, "init", "-q", "-b", "main")
		planGit(b, repo, "add", "-A")
		planGit(b, repo, "commit", "-q", "-m", "fleet")
		planGit(b, repo, "checkout", "-q", "-b", "change")
		app := filepath.Join(repo, "apps", changedApp, "app.yaml")
		data, err := os.ReadFile(app)
		if err != nil {
			b.Fatal(err)
		}
		edited := strings.Replace(string(data), "count: 3", "count: 4", 1)
		if edited == string(data) {
			b.Fatalf("generator changed: %s has no 'count: 3'", changedApp)
		}
		if err := os.WriteFile(app, []byte(edited), 0o644); err != nil {
			b.Fatal(err)
		}
		planRender(b, bin, repo)
		planGit(b, repo, "commit", "-q", "-am", changedApp+": 4 replicas in production")
		b.StartTimer()

		cmd := exec.Command(bin, "plan", "--repo", repo, "--base", "main", "--head", "change", "-o", "json")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err = cmd.Run()
		wall := time.Since(start)
		b.StopTimer()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
			b.Fatalf("flotilla plan: %v\n%s", err, stderr.String())
		}
		if err == nil {
			b.Fatal("flotilla plan exited 0: no changes found")
		}
		var maxRSS int64
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			maxRSS = int64(ru.Maxrss) * 1024
		}
		var p plan.Plan
		if err := json.Unmarshal(stdout.Bytes(), &p); err != nil {
			b.Fatalf("plan JSON: %v", err)
		}

		production := 0
		for c := 0; c < spec.Clusters; c++ {
			if env, _, _ := clusterLabels(c); env == "production" {
				production++
			}
		}
		s := p.Summary
		if s.Clusters != production || s.UnitsChanged != production || s.ObjectsChanged != production ||
			s.UnitsAdded+s.UnitsRemoved+s.ObjectsAdded+s.ObjectsRemoved != 0 {
			b.Errorf("summary %+v, want %d clusters with one changed unit and object each", s, production)
		}
		for _, c := range p.Clusters {
			if len(c.Units) != 1 || c.Units[0].Name != changedApp || c.Units[0].Error != "" || c.Units[0].BaseError != "" {
				b.Errorf("cluster %s: units %+v, want only %s", c.Name, c.Units, changedApp)
				break
			}
			if d := c.Units[0].Objects[0].Diff; !strings.Contains(d, "-  replicas: 3\n+  replicas: 4\n") {
				b.Errorf("cluster %s: diff\n%s", c.Name, d)
				break
			}
		}
		// Only the affected units were rendered: one per side per
		// production cluster.
		if p.Stats.UnitsRendered != 2*production {
			b.Errorf("%d unit renders, want %d (base and head of %s on each production cluster)", p.Stats.UnitsRendered, 2*production, changedApp)
		}
		b.ReportMetric(wall.Seconds(), "s/plan")
		b.ReportMetric(float64(maxRSS)/(1<<20), "MiB-peak-rss")
		b.ReportMetric(float64(p.Stats.UnitsRendered), "units-rendered")
		b.ReportMetric(float64(p.Stats.UnitsCompared), "units-compared")
		b.Logf("plan of a one-app change over %d clusters × %d apps: %.2fs (goal ≤ %v), peak RSS %d MiB; %d of %d units rendered, %d clusters change",
			spec.Clusters, spec.Apps, wall.Seconds(), planGoal, maxRSS>>20, p.Stats.UnitsRendered, p.Stats.UnitsCompared, s.Clusters)
		if wall > planGoal {
			msg := fmt.Sprintf("goal missed: plan took %v", wall.Round(time.Millisecond))
			if os.Getenv("FLOTILLA_BENCH_ENFORCE") == "1" {
				b.Error(msg)
			} else {
				b.Log(msg + " (the machine may be busy; FLOTILLA_BENCH_ENFORCE=1 fails on it)")
			}
		}
	}
}

// planBinary is the flotilla CLI built from this checkout into the user
// cache (go build relinks only when a source changed), so a stale
// bin/flotilla never gives the figure; FLOTILLA_BENCH_CLI names another
// binary instead.
func planBinary(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("FLOTILLA_BENCH_CLI"); bin != "" {
		return bin
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "flotilla", "bench", "flotilla")
	cmd := exec.Command("go", "build", "-o", bin, "./hub/flotilla")
	cmd.Dir = "../.." // the module root (tests run in their package's directory)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./hub/flotilla: %v\n%s", err, out)
	}
	return bin
}

// planRender runs `flotilla render` on repo.
func planRender(b *testing.B, bin, repo string) {
	b.Helper()
	if out, err := exec.Command(bin, "render", "--repo", repo).CombinedOutput(); err != nil {
		b.Fatalf("flotilla render: %v\n%s", err, out)
	}
}

func planGit(b *testing.B, dir string, args ...string) {
	b.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
