package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

// BenchmarkPublish splits the cost of publishing slice refs on a generated
// fleet (FLOTILLA_BENCH_PUBLISH_CLUSTERS, default 10,000, × 20 apps, with
// a status ref per cluster) into the cut (`flotilla publish` without
// --remote, writing the slice commits into the publisher's clone) and the
// push of every slice ref, once by `flotilla publish --remote` (go-git)
// and once by `git push` as the template's CI jobs do, each into its own
// copy of the fleet repo on one Git server; then the same after a commit
// that changes app-01's image on every cloud cluster. Runs `bin/flotilla`
// (make build):
//
//	go test -run '^$' -bench Publish -benchtime 1x -timeout 60m ./test/bench/
func BenchmarkPublish(b *testing.B) {
	clusters := 10000
	if s := os.Getenv("FLOTILLA_BENCH_PUBLISH_CLUSTERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("FLOTILLA_BENCH_PUBLISH_CLUSTERS=%q is not a cluster count", s)
		}
		clusters = n
	}
	b.Run(fmt.Sprintf("clusters=%d", clusters), func(b *testing.B) { benchPublish(b, clusters) })
}

func benchPublish(b *testing.B, clusters int) {
	dir := b.TempDir()
	spec := Spec{Clusters: clusters, Apps: 20}
	if err := Generate(dir, spec); err != nil {
		b.Fatal(err)
	}
	agentBenchRender(b, dir)
	srv := gitserver.Start(b, gitserver.ForgeConfig())
	const goGitRepo, cliRepo = "fleet", "fleet-cli"
	goGitURL := srv.MustCreateRepo(b, goGitRepo, dir)
	srv.MustCreateRepo(b, cliRepo, dir)
	statusRefs(b, srv, goGitRepo, clusters)
	statusRefs(b, srv, cliRepo, clusters)
	creds := b.TempDir()
	for name, v := range map[string]string{"username": gitserver.Maintainer, "password": srv.Password(gitserver.Maintainer)} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte(v), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	publisher := filepath.Join(b.TempDir(), "publisher")
	gitCLI(b, "", "clone", "-q", "--bare", srv.RepoPath(goGitRepo), publisher)

	timed := func(name string, args ...string) time.Duration {
		b.Helper()
		start := time.Now()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return time.Since(start)
	}
	cut := func() time.Duration {
		return timed(flotilla(b), "publish", "--repo", publisher, "--rev", "main")
	}
	goGitPush := func() (time.Duration, gitserver.Stats) {
		st := srv.Stats(goGitRepo)
		// The cut is done: publish finds every slice ref current and pushes.
		took := timed(flotilla(b), "publish", "--repo", publisher, "--rev", "main", "--remote", goGitURL, "--git-credentials-dir", creds, "--timeout", "30m")
		return took, srv.Stats(goGitRepo).Sub(st)
	}
	cliPush := func() (time.Duration, gitserver.Stats) {
		st := srv.Stats(cliRepo)
		refs := "+" + gitrepo.SliceRefPrefix + "*:" + gitrepo.SliceRefPrefix + "*"
		took := timed("git", "--git-dir="+publisher, "push", "-q", srv.UserURL(cliRepo, gitserver.Maintainer), refs)
		return took, srv.Stats(cliRepo).Sub(st)
	}
	type phase struct {
		name                      string
		cut, recut, goGit, cliGit time.Duration
		goGitStats, cliStats      gitserver.Stats
	}
	run := func(name string) phase {
		p := phase{name: name, cut: cut(), recut: cut()}
		p.goGit, p.goGitStats = goGitPush()
		p.cliGit, p.cliStats = cliPush()
		return p
	}

	b.ResetTimer()
	first := run("first publish")
	b.StopTimer()

	before := agentBenchTree(b, dir)
	changeAppImage(b, dir)
	agentBenchRender(b, dir)
	_, _, changed := agentBenchPush(b, srv, goGitRepo, dir, before, "app-01: nginx 1.28")
	gitCLI(b, publisher, "fetch", "-q", srv.RepoPath(goGitRepo), "+refs/heads/main:refs/heads/main")
	b.StartTimer()
	second := run("after the change")
	b.StopTimer()

	b.Logf("%d clusters × %d apps, %d status refs; the change: %d files of the fleet", clusters, spec.Apps, clusters, changed)
	b.Logf("%-18s %10s %12s %24s %24s", "phase", "cut", "cut again", "push: flotilla (go-git)", "push: git push")
	for _, p := range []phase{first, second} {
		// publish --remote re-cuts (finding nothing to do) before it pushes.
		goGitPushOnly := max(p.goGit-p.recut, 0)
		b.Logf("%-18s %10s %12s %24s %24s", p.name, p.cut.Round(time.Millisecond), p.recut.Round(time.Millisecond),
			fmt.Sprintf("%s, %d KiB", goGitPushOnly.Round(time.Millisecond), p.goGitStats.ReceivePackBytes>>10),
			fmt.Sprintf("%s, %d KiB", p.cliGit.Round(time.Millisecond), p.cliStats.ReceivePackBytes>>10))
		tag := strings.ReplaceAll(p.name, " ", "-")
		b.ReportMetric(p.cut.Seconds(), "s-cut-"+tag)
		b.ReportMetric(goGitPushOnly.Seconds(), "s-push-gogit-"+tag)
		b.ReportMetric(p.cliGit.Seconds(), "s-push-git-"+tag)
	}
	b.Logf("load average %s", LoadAverage())
}
