package gitrepo_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

var sliceFleet = map[string]string{
	"clusters/member1.yaml":           "kind: Cluster\n",
	"rendered/member1/slice.yaml":     "units: [web]\n",
	"rendered/member1/web/kust.yaml":  "resources: []\n",
	"rendered/member2/slice.yaml":     "units: [db]\n",
	"apps/web/app.yaml":               "kind: Application\n",
	"apps/web/manifests/deploy.yaml":  "kind: Deployment\n",
	"apps/db/manifests/sts.yaml":      "kind: StatefulSet\n",
	"charts/web/Chart.yaml":           "name: web\n",
	"charts/web/templates/svc.yaml":   "kind: Service\n",
	"charts/other/Chart.yaml":         "name: other\n",
	"fleets/all.yaml":                 "kind: Fleet\n",
	"rendered/member1/web/patch.yaml": "op: add\n",
}

// member1's slice takes apps/web without its app.yaml, as publish cuts an
// application's directory whose app.yaml the units' hashes leave out.
var member1Paths = []string{"rendered/member1", "apps/web", gitrepo.PathExclude + "apps/web/app.yaml", "charts/web"}

// cutAndPublish cuts member1's and member2's slices from main in a clone
// and pushes them, as CI does after a merge.
func cutAndPublish(t *testing.T, srv *gitserver.Server) map[string]string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "clone")
	run(t, "", "git", "clone", "-q", "--bare", srv.UserURL("fleet", gitserver.Maintainer), clone)
	run(t, clone, "git", "fetch", "-q", "origin", "+refs/flotilla/slices/*:refs/flotilla/slices/*")
	loose := run(t, clone, "git", "count-objects")
	got, err := gitrepo.CutSlices(clone, "main", map[string][]string{
		"member1": member1Paths,
		"member2": {"rendered/member2", "apps/db"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The cut wrote one pack, no loose objects, and git finds the slices
	// complete and well formed.
	if after := run(t, clone, "git", "count-objects"); after != loose {
		t.Errorf("the cut wrote loose objects: %s before, %s after", loose, after)
	}
	run(t, clone, "git", "fsck", "--strict", "--no-dangling")
	if err := gitrepo.PushSlices(context.Background(), clone, srv.URL("fleet"), userAuth(srv, gitserver.Maintainer)); err != nil {
		t.Fatal(err)
	}
	return got
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestSliceSync(t *testing.T) {
	for _, protocol := range []string{gitrepo.ProtocolAuto, gitrepo.ProtocolV0} {
		t.Run("protocol "+protocol, func(t *testing.T) {
			srv, auth := fleet(t, sliceFleet)
			ctx := context.Background()
			slices := cutAndPublish(t, srv)
			head := srv.Head("fleet", "main")
			src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir(), Ref: gitrepo.SliceRef("member1"), Protocol: protocol}

			res, err := src.Sync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Hash != head || res.Revision != "main@sha1:"+head || !res.Changed || !res.Fetched {
				t.Fatalf("sync = %+v, want main's head %s", res, head)
			}
			want := map[string]string{}
			for p, c := range sliceFleet {
				for _, sel := range member1Paths {
					if strings.HasPrefix(p, sel+"/") && p != "apps/web/app.yaml" {
						want[p] = c
					}
				}
			}
			if got := readDir(t, res.Dir); !equalFiles(got, want) {
				t.Fatalf("checkout = %v, want %v", got, want)
			}
			c, err := src.Commit(res.Hash)
			if err != nil || c.Hash != head {
				t.Fatalf("Commit(%s) = %+v, %v: the main commit must be readable for verification", head, c, err)
			}

			before := srv.Stats("fleet")
			res2, err := src.Sync(ctx)
			if err != nil || res2.Fetched || res2.Changed || res2.Hash != head {
				t.Fatalf("idle sync = %+v, %v", res2, err)
			}
			if d := srv.Stats("fleet").Sub(before); d.UploadPacks != 0 {
				t.Fatalf("idle sync fetched: %+v", d)
			}

			// A merge that changes member1: re-cut, re-published, fetched.
			next := srv.Commit(t, "fleet", gitserver.Maintainer,
				map[string]string{"rendered/member1/slice.yaml": "units: [web, cache]\n", "apps/db/manifests/sts.yaml": "kind: StatefulSet # v2\n"}, nil, "member1 gets a cache")
			again := cutAndPublish(t, srv)
			if again["member1"] == slices["member1"] {
				t.Fatal("the slice commit did not move")
			}
			res3, err := src.Sync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res3.Hash != next || !res3.Changed || !res3.Fetched {
				t.Fatalf("sync after the merge = %+v, want %s", res3, next)
			}
			if got := readDir(t, res3.Dir); got["rendered/member1/slice.yaml"] != "units: [web, cache]\n" || got["apps/db/manifests/sts.yaml"] != "" {
				t.Fatalf("checkout after the merge = %v", got)
			}

			// A restarted agent has the last checkout offline.
			restarted := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: src.CacheDir, Ref: gitrepo.SliceRef("member1"), Protocol: protocol}
			if last, ok := restarted.LastGood(); !ok || last.Hash != next || last.Dir != res3.Dir {
				t.Fatalf("LastGood after restart = %+v, %v", last, ok)
			}
			if old, err := restarted.Checkout(ctx, next); err != nil || old.Dir != res3.Dir {
				t.Fatalf("Checkout(%s) = %+v, %v", next, old, err)
			}
			// Strict verification walks main's history, which a slice does
			// not hold: the Source fetches main's commits, also into an
			// empty cache (a restarted agent that lost its volume).
			fresh := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir(), Ref: gitrepo.SliceRef("member1"), Protocol: protocol}
			if _, err := fresh.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			for name, s := range map[string]*gitrepo.Source{"restarted": restarted, "empty cache": fresh} {
				between, err := s.CommitsBetween(ctx, head, next)
				if err != nil || len(between) != 1 || between[0].Hash != next || between[0].Message != "member1 gets a cache\n" {
					t.Fatalf("%s: CommitsBetween(%s, %s) = %+v, %v, want the merge alone", name, head, next, between, err)
				}
			}
		})
	}
}

// TestSliceRefusesForgery: a slice commit that is not part of the main
// commit it names is refused, whoever published it.
func TestSliceRefusesForgery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forge  func(t *testing.T, git func(args ...string) string, slice, other string) string
		reason string
	}{
		{
			name: "a file changed",
			forge: func(t *testing.T, git func(args ...string) string, slice, _ string) string {
				blob := git("hash-object", "-w", "--stdin")
				git("read-tree", slice+"^{tree}")
				git("update-index", "--cacheinfo", "100644,"+blob+",rendered/member1/slice.yaml")
				return git("commit-tree", git("write-tree"), "-m", git("log", "-1", "--format=%B", slice))
			},
			reason: "no proof of directory", // rendered/member1 is main's as a whole
		},
		{
			name: "a file added",
			forge: func(t *testing.T, git func(args ...string) string, slice, _ string) string {
				blob := git("hash-object", "-w", "--stdin")
				git("read-tree", slice+"^{tree}")
				git("update-index", "--add", "--cacheinfo", "100644,"+blob+",rendered/member1/evil.yaml")
				return git("commit-tree", git("write-tree"), "-m", git("log", "-1", "--format=%B", slice))
			},
			reason: "no proof of directory",
		},
		{
			name: "another main commit named",
			forge: func(t *testing.T, git func(args ...string) string, slice, other string) string {
				return git("commit-tree", slice+"^{tree}", "-m", "slice\n\nFlotilla-Source: "+other)
			},
			reason: "does not hold main commit",
		},
		{
			name: "no trailer",
			forge: func(t *testing.T, git func(args ...string) string, slice, _ string) string {
				return git("commit-tree", slice+"^{tree}", "-m", "slice")
			},
			reason: "no Flotilla-Source trailer",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, auth := fleet(t, sliceFleet)
			first := srv.Head("fleet", "main")
			srv.Commit(t, "fleet", gitserver.Maintainer, map[string]string{"fleets/all.yaml": "kind: Fleet # 2\n"}, nil, "second")
			slices := cutAndPublish(t, srv)
			repo := srv.RepoPath("fleet")
			index := filepath.Join(t.TempDir(), "index")
			git := func(args ...string) string {
				t.Helper()
				cmd := exec.Command("git", append([]string{"--git-dir=" + repo, "-c", "user.name=mallory", "-c", "user.email=m@example.com"}, args...)...)
				cmd.Env = append(os.Environ(), "GIT_INDEX_FILE="+index, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
				cmd.Stdin = strings.NewReader("kind: Evil\n")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
				return strings.TrimSpace(string(out))
			}
			forged := tc.forge(t, git, slices["member1"], first)
			git("update-ref", gitrepo.SliceRef("member1"), forged)

			src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir(), Ref: gitrepo.SliceRef("member1")}
			_, err := src.Sync(context.Background())
			if !errors.Is(err, gitrepo.ErrBadSlice) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("sync of a forged slice: %v, want ErrBadSlice (%s)", err, tc.reason)
			}
			if _, ok := src.LastGood(); ok {
				t.Fatal("a forged slice became the last good checkout")
			}
		})
	}
}

// TestPushSlicesExact: publishing pushes what the slices add to main and
// to the server's previous slices, found without walking main; the server
// (git receive-pack, which checks that every pushed ref is complete)
// takes it, first and after a merge, and fsck finds nothing missing.
// Slices of a main commit the server lacks, or that do not follow the
// server's slice ref, need the walk: the publisher's push
// (pushSlicesExpecting, through the test's PushSlices) then pushes with it.
func TestPushSlicesExact(t *testing.T) {
	srv, auth := fleet(t, sliceFleet)
	ctx := context.Background()
	serverRepo := srv.RepoPath("fleet")
	paths := map[string][]string{"member1": member1Paths, "member2": {"rendered/member2", "apps/db"}}
	clone := filepath.Join(t.TempDir(), "clone")
	run(t, "", "git", "clone", "-q", "--bare", srv.UserURL("fleet", gitserver.Maintainer), clone)
	publish := func(exact bool) {
		t.Helper()
		if _, err := gitrepo.CutSlices(clone, "main", paths); err != nil {
			t.Fatal(err)
		}
		var err error
		if exact {
			err = gitrepo.PushSlicesExact(ctx, clone, srv.URL("fleet"), auth)
		} else {
			err = gitrepo.PushSlices(ctx, clone, srv.URL("fleet"), auth)
		}
		if err != nil {
			t.Fatal(err)
		}
		run(t, "", "git", "--git-dir="+serverRepo, "fsck", "--strict", "--no-dangling")
		for cluster := range paths {
			ref := gitrepo.SliceRef(cluster)
			if l, r := run(t, "", "git", "--git-dir="+clone, "rev-parse", ref), run(t, "", "git", "--git-dir="+serverRepo, "rev-parse", ref); l != r {
				t.Fatalf("%s: the server has %s, the publisher %s", ref, r, l)
			}
		}
	}
	publish(true)
	// Git updating a slice ref in the publisher's clone: the lock file it
	// writes beside the ref is no slice of a cluster "member1.lock", and is
	// never pushed.
	lock := filepath.Join(clone, filepath.FromSlash(gitrepo.SliceRef("member1"))+".lock")
	if err := os.WriteFile(lock, []byte(run(t, "", "git", "--git-dir="+clone, "rev-parse", gitrepo.SliceRef("member1"))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if refs := run(t, "", "git", "--git-dir="+serverRepo, "for-each-ref", "--format=%(refname)", gitrepo.SliceRefPrefix); strings.Contains(refs, ".lock") {
			t.Errorf("a lock file was pushed as a slice ref:\n%s", refs)
		}
	}()
	srv.Commit(t, "fleet", gitserver.Maintainer, map[string]string{"rendered/member1/web/kust.yaml": "resources: [a.yaml]\n", "apps/db/manifests/sts.yaml": "kind: StatefulSet # v2\n"}, nil, "a merge")
	run(t, clone, "git", "fetch", "-q", "origin", "+refs/heads/main:refs/heads/main")
	publish(true)
	before := srv.Stats("fleet")
	publish(true) // nothing to push
	if d := srv.Stats("fleet").Sub(before); d.ReceivePacks != 0 {
		t.Errorf("publishing again pushed: %+v", d)
	}

	// A main commit only the publisher has.
	local := run(t, "", "git", "--git-dir="+clone, "-c", "user.name=p", "-c", "user.email=p@example.com", "commit-tree", "main^{tree}", "-p", "main", "-m", "not pushed")
	run(t, "", "git", "--git-dir="+clone, "update-ref", "refs/heads/main", local)
	if _, err := gitrepo.CutSlices(clone, "main", paths); err != nil {
		t.Fatal(err)
	}
	if err := gitrepo.PushSlicesExact(ctx, clone, srv.URL("fleet"), auth); !errors.Is(err, gitrepo.ErrNeedsWalk) {
		t.Fatalf("slices of a main commit the server lacks: %v, want ErrNeedsWalk", err)
	}
	publish(false)

	// The server's slice ref is not the new slice's parent.
	run(t, "", "git", "--git-dir="+serverRepo, "update-ref", "-d", gitrepo.SliceRef("member1"))
	run(t, "", "git", "--git-dir="+clone, "update-ref", "refs/heads/main", run(t, "", "git", "--git-dir="+clone, "rev-parse", "main^"))
	if _, err := gitrepo.CutSlices(clone, "main", paths); err != nil {
		t.Fatal(err)
	}
	if err := gitrepo.PushSlicesExact(ctx, clone, srv.URL("fleet"), auth); !errors.Is(err, gitrepo.ErrNeedsWalk) {
		t.Fatalf("a slice whose parent the server's ref is not: %v, want ErrNeedsWalk", err)
	}
	publish(false)
}

// TestSliceRefOptional: the default transport follows the branch until
// the cluster's slice is published, then the slice, at the same revision
// without a new checkout of different content, and keeps to the slice
// after a restart.
func TestSliceRefOptional(t *testing.T) {
	srv, auth := fleet(t, sliceFleet)
	ctx := context.Background()
	head := srv.Head("fleet", "main")
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir(), Ref: gitrepo.SliceRef("member1"), RefOptional: true}

	res, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Hash != head || src.Following() != "refs/heads/main" || !src.AwaitingSlice() {
		t.Fatalf("before publishing: sync = %+v following %s, want main's head on the branch", res, src.Following())
	}
	if got := readDir(t, res.Dir); got["charts/other/Chart.yaml"] == "" {
		t.Fatalf("branch checkout = %v, want the whole tree", got)
	}

	cutAndPublish(t, srv)
	res, err = src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Hash != head || res.Changed || src.Following() != gitrepo.SliceRef("member1") || src.AwaitingSlice() {
		t.Fatalf("after publishing: sync = %+v following %s, want the same revision from the slice", res, src.Following())
	}
	if got := readDir(t, res.Dir); got["rendered/member1/slice.yaml"] != sliceFleet["rendered/member1/slice.yaml"] {
		t.Fatalf("slice checkout = %v", got)
	}

	next := srv.Commit(t, "fleet", gitserver.Maintainer, map[string]string{"rendered/member1/slice.yaml": "units: [web, cache]\n"}, nil, "member1 gets a cache")
	// Not published yet: the agent stays on the slice, at the last
	// published revision, rather than going back to the branch.
	if res, err = src.Sync(ctx); err != nil || res.Hash != head {
		t.Fatalf("sync before the publish of %s = %+v, %v, want %s", next, res, err, head)
	}
	cutAndPublish(t, srv)
	restarted := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: src.CacheDir, Ref: gitrepo.SliceRef("member1"), RefOptional: true}
	if last, ok := restarted.LastGood(); !ok || last.Hash != head {
		t.Fatalf("LastGood after restart = %+v, %v", last, ok)
	}
	if res, err = restarted.Sync(ctx); err != nil || res.Hash != next || !res.Changed || restarted.Following() != gitrepo.SliceRef("member1") {
		t.Fatalf("sync after restart = %+v, %v following %s, want %s from the slice", res, err, restarted.Following(), next)
	}
}

// sliceSources is each remote slice ref's main commit (its source), by
// cluster.
func sliceSources(t *testing.T, srv *gitserver.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	bare := srv.RepoPath("fleet")
	refs := run(t, "", "git", "--git-dir="+bare, "for-each-ref", "--format=%(refname)", gitrepo.SliceRefPrefix)
	for _, ref := range strings.Fields(refs) {
		msg := run(t, "", "git", "--git-dir="+bare, "log", "-1", "--format=%B", ref)
		_, src, _ := strings.Cut(msg, gitrepo.SliceSourceTrailer+": ")
		out[strings.TrimPrefix(ref, gitrepo.SliceRefPrefix)] = strings.TrimSpace(src)
	}
	return out
}

// TestPublishSlices: publishing is one job that cleans up and never moves
// a slice backwards, against the real Git server: it creates the refs,
// deletes the ref of a cluster that left, pushes nothing for a commit that
// is no longer main's head, and a run that races a newer merge's publish
// between its cut and its push leaves the newer slices in place.
func TestPublishSlices(t *testing.T) {
	srv, _ := fleet(t, sliceFleet)
	ctx := context.Background()
	both := map[string][]string{"member1": member1Paths, "member2": {"rendered/member2", "apps/db"}}
	// publish runs a publish of rev; beforePush, when given, runs between
	// its cut and its push.
	publish := func(t *testing.T, rev string, paths map[string][]string, beforePush ...func()) gitrepo.Published {
		t.Helper()
		clone := filepath.Join(t.TempDir(), "clone")
		run(t, "", "git", "clone", "-q", "--bare", srv.UserURL("fleet", gitserver.Maintainer), clone)
		o := gitrepo.PublishOptions{
			RepoDir: clone, Remote: srv.URL("fleet"), Auth: userAuth(srv, gitserver.Maintainer), Rev: rev, Paths: paths,
		}
		for _, f := range beforePush {
			o = gitrepo.WithBeforePush(o, f)
		}
		res, err := gitrepo.PublishSlices(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	first := srv.Head("fleet", "main")
	res := publish(t, first, both)
	if res.Superseded || len(res.Moved) != 2 || len(res.Deleted) != 0 {
		t.Fatalf("first publish = %+v, want both refs created", res)
	}
	if got := sliceSources(t, srv); got["member1"] != first || got["member2"] != first || len(got) != 2 {
		t.Fatalf("slice sources = %v, want both at %s", got, first)
	}

	// member2 leaves the fleet.
	second := srv.Commit(t, "fleet", gitserver.Maintainer, map[string]string{"rendered/member1/web/kust.yaml": "resources: [a]\n"}, []string{"rendered/member2/slice.yaml"}, "member2 leaves")
	res = publish(t, second, map[string][]string{"member1": member1Paths})
	if res.Superseded || len(res.Deleted) != 1 || res.Deleted[0] != "member2" {
		t.Fatalf("publish after member2 left = %+v, want its ref deleted", res)
	}
	if got := sliceSources(t, srv); got["member1"] != second || len(got) != 1 {
		t.Fatalf("slice sources = %v, want member1 alone at %s", got, second)
	}

	// A late run of an older merge pushes nothing.
	res = publish(t, first, both)
	if !res.Superseded || res.Head != second {
		t.Fatalf("publish of the older %s = %+v, want superseded by %s", first, res, second)
	}
	if got := sliceSources(t, srv); got["member1"] != second || len(got) != 1 {
		t.Fatalf("slice sources after a late publish = %v, want member1 alone at %s", got, second)
	}

	// A run whose cut is overtaken, before its push, by a merge and that
	// merge's publish: the push is refused (its expected old values are
	// stale), the run starts over, finds itself superseded and leaves the
	// newer slices.
	var third string
	overtake := func() {
		if third != "" {
			return
		}
		third = srv.Commit(t, "fleet", gitserver.Maintainer, map[string]string{"rendered/member1/web/kust.yaml": "resources: [b]\n"}, nil, "a newer merge")
		if r := publish(t, third, map[string][]string{"member1": member1Paths}); r.Superseded || len(r.Moved) != 1 {
			t.Errorf("the newer merge's publish = %+v", r)
		}
	}
	res = publish(t, second, map[string][]string{"member1": member1Paths}, overtake)
	if !res.Superseded || res.Head != third {
		t.Fatalf("the overtaken publish = %+v, want superseded by %s", res, third)
	}
	if got := sliceSources(t, srv); got["member1"] != third || len(got) != 1 {
		t.Fatalf("slice sources after the race = %v, want member1 at the newer %s", got, third)
	}
}
