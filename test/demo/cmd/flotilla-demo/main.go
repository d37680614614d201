// Command flotilla-demo is `make demo`: a local fleet of three clusters
// kept in sync by their agents through a local Git server (package demo).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flotilla-gitops/flotilla/test/demo"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

func main() {
	var (
		dir      = flag.String("dir", "", "working directory, kept after exit (default: a temporary directory, removed on exit)")
		timeout  = flag.Duration("timeout", 8*time.Minute, "how long to wait for the fleet to get in sync")
		interval = flag.Duration("interval", 30*time.Second, "the agents' reconcile interval")
		listen   = flag.String("dashboard-listen", "127.0.0.1:8080", "where flotilla dashboard serves the fleet's page (port 0 picks a free one)")
	)
	flag.Parse()
	os.Exit(run(*dir, *timeout, *interval, *listen))
}

func run(dir string, timeout, interval time.Duration, listen string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	testenv.LeaveSignalsToCaller()
	began := time.Now()
	f, err := demo.Start(ctx, demo.Options{Dir: dir, Out: os.Stdout, Interval: interval, DashboardListen: listen})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer func() {
		fmt.Println("stopping the agents, clusters and Git server…")
		if err := f.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stop:", err)
		}
	}()
	fmt.Println("waiting for every cluster to be InSync:")
	if _, err := f.WaitInSync(ctx, timeout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	table, err := f.StatusTable(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	fmt.Printf("\nThe fleet is in sync after %s. flotilla status:\n\n%s\n", time.Since(began).Round(time.Second), table)
	fmt.Printf("waiting for the GlobalJob %s (jobs/%[1]s.yaml) to be gang-scheduled on %s's GPU node and complete:\n", demo.DemoJob, demo.DemoJobCluster)
	if _, err := f.WaitJobCompleted(ctx, demo.DemoJobCluster, demo.DemoJob, timeout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	jobs, err := f.Run(ctx, "", f.Flotilla(), f.StatusArgs("jobs")...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	fmt.Printf("\nflotilla status jobs:\n\n%s\n", jobs)
	fmt.Printf("The fleet's dashboard (from Git alone, refreshed every 5s): %s\n\n", f.DashboardURL)
	fmt.Print(tryThis(f))
	<-ctx.Done()
	return 0
}

func tryThis(f *demo.Fleet) string {
	status := f.Flotilla()
	for _, a := range f.StatusArgs() {
		status += " " + a
	}
	return fmt.Sprintf(`Try it (in another terminal):

  cd %[1]s
  # change an application, e.g. nginx's replicas in apps/nginx/app.yaml
  %[2]s render
  %[2]s plan --base origin/main   # what each cluster will get
  git add -A && git commit -m "Scale nginx" && git push
  %[3]s --watch

A change that travels the fleet wave by wave — iot-collector to member1
first, to member2 and edge-1 once member1 has been Ready for 10s:

  cat >> apps/iot-collector/app.yaml <<'EOF'
%[5]sEOF
  %[2]s render && git add -A && git commit -qm "iot-collector: roll out to member1 first" && git push -q
  sed -i 's/cpu: 10m/cpu: 20m/' apps/iot-collector/manifests/deployment.yaml
  %[2]s render && %[2]s plan --base origin/main   # held for edge-1, member2
  git add -A && git commit -qm "iot-collector: more CPU" && git push -q
  git fetch -q                                   # the agents' status refs
  %[2]s rollout status iot-collector            # wave canary, then the rest
  %[2]s rollout advance --message-file /tmp/msg && git add -A && git commit -qF /tmp/msg && git push -q

%[3]s jobs shows the GlobalJob (jobs/gpu-smoke.yaml); edit its
workers' SETTING, render and push to run it again.

Agents poll Git every 5s; their logs are under %[4]s/agents/.
Press Ctrl-C to stop everything.
`, f.CloneDir, f.Flotilla(), status, f.Dir, demo.CollectorRollout)
}
