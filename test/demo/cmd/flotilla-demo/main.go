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
	)
	flag.Parse()
	os.Exit(run(*dir, *timeout, *interval))
}

func run(dir string, timeout, interval time.Duration) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	testenv.LeaveSignalsToCaller()
	began := time.Now()
	f, err := demo.Start(ctx, demo.Options{Dir: dir, Out: os.Stdout, Interval: interval})
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

Agents poll Git every 5s; their logs are under %[4]s/agents/.
Press Ctrl-C to stop everything.
`, f.CloneDir, f.Flotilla(), status, f.Dir)
}
