package gitrepo_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

var fleetFiles = map[string]string{
	"clusters/member1.yaml":          "name: member1\n",
	"rendered/member1/slice.yaml":    "units: [web]\n",
	"rendered/member2/slice.yaml":    "units: [db]\n",
	"charts/web/Chart.yaml":          "name: web\n",
	"apps/web/app.yaml":              "kind: Application\n",
	"rendered/member1/web/kust.yaml": "resources: []\n",
}

func TestSyncFetchesOnlyWhenTheHeadMoves(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v0Server bool   // the server drops the Git-Protocol header
		protocol string // Source.Protocol
		v2       bool   // polls are v2 ls-refs
	}{
		{name: "v2 server, auto", v2: true},
		{name: "v2 server, v2", protocol: gitrepo.ProtocolV2, v2: true},
		{name: "v2 server, v0", protocol: gitrepo.ProtocolV0},
		{name: "v0 server, auto", v0Server: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := gitserver.ForgeConfig()
			cfg.ProtocolV0Only = tc.v0Server
			srv := gitserver.Start(t, cfg)
			srv.MustCreateRepo(t, "fleet", writeDir(t, fleetFiles))
			testSyncFetchesOnlyWhenTheHeadMoves(t, srv, tc.protocol, tc.v2)
		})
	}
}

func testSyncFetchesOnlyWhenTheHeadMoves(t *testing.T, srv *gitserver.Server, protocol string, v2 bool) {
	auth := userAuth(srv, gitserver.Maintainer)
	ctx := context.Background()
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir(), Protocol: protocol}

	before := srv.Stats("fleet")
	res, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cold := srv.Stats("fleet").Sub(before)
	head := srv.Head("fleet", "main")
	if res.Hash != head || res.Revision != "main@sha1:"+head || !res.Changed || !res.Fetched {
		t.Fatalf("first sync = %+v, head %s", res, head)
	}
	if got := readDir(t, res.Dir); !equalFiles(got, fleetFiles) {
		t.Fatalf("checkout = %v", got)
	}
	if cold.UploadPacks == 0 {
		t.Fatalf("cold sync fetched no pack: %+v", cold)
	}

	// Unchanged head: one ls-remote (v0) or ls-refs (v2), no pack.
	before = srv.Stats("fleet")
	res2, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idle := srv.Stats("fleet").Sub(before)
	if res2.Changed || res2.Fetched || res2.Hash != head || res2.Dir != res.Dir {
		t.Fatalf("idle sync = %+v", res2)
	}
	switch {
	case v2 && (idle.LsRefs != 1 || idle.InfoRefs != 0 || idle.UploadPacks != 0):
		t.Fatalf("idle sync requests = %+v, want one v2 ls-refs and nothing else", idle)
	case !v2 && (idle.InfoRefs != 1 || idle.LsRefs != 0 || idle.UploadPacks != 0):
		t.Fatalf("idle sync requests = %+v, want one info/refs and no upload-pack", idle)
	}

	// A new commit: fetched, new directory, old one kept (KeepCheckouts 2).
	next := srv.Commit(t, "fleet", gitserver.Maintainer,
		map[string]string{"rendered/member1/slice.yaml": "units: [web, cache]\n"},
		[]string{"rendered/member2"}, "member1 gets a cache")
	before = srv.Stats("fleet")
	res3, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	incr := srv.Stats("fleet").Sub(before)
	if res3.Hash != next || !res3.Changed || !res3.Fetched || res3.Dir == res.Dir {
		t.Fatalf("sync after commit = %+v", res3)
	}
	got := readDir(t, res3.Dir)
	if got["rendered/member1/slice.yaml"] != "units: [web, cache]\n" || got["rendered/member2/slice.yaml"] != "" {
		t.Fatalf("checkout after commit = %v", got)
	}
	if _, err := os.Stat(res.Dir); err != nil {
		t.Fatalf("previous checkout removed too early: %v", err)
	}
	if _, err := os.Stat(filepath.Join(src.CacheDir, "repo", "shallow")); err != nil {
		t.Fatalf("cache is not shallow: %v", err)
	}
	t.Logf("bytes sent: cold sync %d (pack %d), idle poll %d, incremental %d (pack %d)",
		cold.BytesSent, cold.UploadPackBytesSent, idle.BytesSent, incr.BytesSent, incr.UploadPackBytesSent)
	if incr.UploadPacks != 1 || (v2 && incr.InfoRefs != 0) {
		t.Fatalf("incremental sync requests = %+v, want one upload-pack (and no advertisement in v2)", incr)
	}
	if incr.UploadPackBytesSent >= cold.UploadPackBytesSent {
		t.Fatalf("incremental fetch (%d bytes) not smaller than a cold one (%d)", incr.UploadPackBytesSent, cold.UploadPackBytesSent)
	}
}

func TestSyncRestartReusesCache(t *testing.T) {
	srv, auth := fleet(t, fleetFiles)
	ctx := context.Background()
	cache := t.TempDir()
	first := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache}
	res, err := first.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}

	restarted := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache}
	last, ok := restarted.LastGood()
	if !ok || last.Hash != res.Hash || last.Dir != res.Dir {
		t.Fatalf("LastGood after restart = %+v, %v", last, ok)
	}
	before := srv.Stats("fleet")
	res2, err := restarted.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := srv.Stats("fleet").Sub(before); d.UploadPacks != 0 || res2.Fetched || res2.Changed {
		t.Fatalf("restarted sync fetched: %+v, result %+v", d, res2)
	}

	// Losing the object store while the checkout survives: the head's
	// commit is fetched again, so it can still be verified.
	if err := os.RemoveAll(filepath.Join(cache, "repo")); err != nil {
		t.Fatal(err)
	}
	again := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache}
	res3, err := again.Sync(ctx)
	if err != nil || !res3.Fetched || res3.Changed || res3.Hash != res.Hash {
		t.Fatalf("sync without object store = %+v, %v", res3, err)
	}
	if c, err := again.Commit(res.Hash); err != nil || c.Hash != res.Hash {
		t.Fatalf("Commit after refetch = %+v, %v", c, err)
	}

	// A different branch or URL on the same cache does not reuse it.
	other := &gitrepo.Source{URL: srv.URL("fleet"), Branch: "other", Auth: auth, CacheDir: cache}
	if _, ok := other.LastGood(); ok {
		t.Fatal("LastGood reused a checkout of another branch")
	}
}

// TestSyncConnectionClosed: a remote that accepts connections and closes
// them without an answer (a server going down, a proxy dropping the
// link) is an outage, over either protocol.
func TestSyncConnectionClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, protocol := range []string{gitrepo.ProtocolAuto, gitrepo.ProtocolV2, gitrepo.ProtocolV0} {
		t.Run("protocol="+protocol, func(t *testing.T) {
			src := &gitrepo.Source{URL: "http://" + ln.Addr().String() + "/fleet.git", CacheDir: t.TempDir(), Protocol: protocol}
			if _, err := src.Sync(context.Background()); !errors.Is(err, gitrepo.ErrUnreachable) {
				t.Fatalf("sync: %v, want ErrUnreachable", err)
			}
		})
	}
}

// TestSyncUntrustedCertificate: a server whose certificate is not trusted
// answered; it is not an outage to wait out but a setting to fix.
func TestSyncUntrustedCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	for _, protocol := range []string{gitrepo.ProtocolV2, gitrepo.ProtocolV0} {
		t.Run("protocol="+protocol, func(t *testing.T) {
			src := &gitrepo.Source{URL: srv.URL + "/fleet.git", CacheDir: t.TempDir(), Protocol: protocol}
			if _, err := src.Sync(context.Background()); err == nil || errors.Is(err, gitrepo.ErrUnreachable) {
				t.Fatalf("sync: %v, want an error that is not ErrUnreachable", err)
			}
		})
	}
}

func TestSyncOutage(t *testing.T) {
	srv, auth := fleet(t, fleetFiles)
	ctx := context.Background()
	cache := t.TempDir()
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache}
	res, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	_, err = src.Sync(ctx)
	if !errors.Is(err, gitrepo.ErrUnreachable) {
		t.Fatalf("sync while down: %v, want ErrUnreachable", err)
	}
	if last, ok := src.LastGood(); !ok || last.Hash != res.Hash {
		t.Fatalf("LastGood while down = %+v, %v", last, ok)
	}
	// An agent restarted during the outage still has its checkout.
	restarted := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache}
	if last, ok := restarted.LastGood(); !ok || readDir(t, last.Dir)["clusters/member1.yaml"] != "name: member1\n" {
		t.Fatalf("LastGood of a restarted source while down = %+v, %v", last, ok)
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	next := srv.Commit(t, "fleet", gitserver.Maintainer, map[string]string{"new.yaml": "x\n"}, nil, "while away")
	res2, err := restarted.Sync(ctx)
	if err != nil {
		t.Fatalf("sync after recovery: %v", err)
	}
	if res2.Hash != next || !res2.Changed {
		t.Fatalf("sync after recovery = %+v", res2)
	}
}

func TestSyncTimeout(t *testing.T) {
	srv, auth := fleet(t, fleetFiles)
	// The server would answer after an hour (a request ends when its client
	// gives up), so ErrUnreachable proves the 300ms timeout ended the sync.
	srv.SetDelay(time.Hour)
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir(), Timeout: 300 * time.Millisecond}
	start := time.Now()
	_, err := src.Sync(context.Background())
	if !errors.Is(err, gitrepo.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	t.Logf("sync gave up after %v", time.Since(start).Round(time.Millisecond))
	srv.SetDelay(0)

	// The caller's own cancellation is not an outage.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = src.Sync(ctx)
	if errors.Is(err, gitrepo.ErrUnreachable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled sync: %v", err)
	}
}

func TestSyncClassifiedErrors(t *testing.T) {
	srv, auth := fleet(t, fleetFiles)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name   string
		url    string
		branch string
		auth   gitrepo.Auth
		want   error
	}{
		{"wrong password", srv.URL("fleet"), "", gitrepo.Auth{Username: gitserver.Maintainer, Password: "wrong"}, gitrepo.ErrAuth},
		{"no credentials", srv.URL("fleet"), "", gitrepo.Auth{}, gitrepo.ErrAuth},
		{"unknown repository", srv.URL("nope"), "", auth, gitrepo.ErrRepoNotFound},
		{"unknown branch", srv.URL("fleet"), "release", auth, gitrepo.ErrRefNotFound},
		{"nothing listening", "http://" + closedAddr + "/fleet.git", "", auth, gitrepo.ErrUnreachable},
		{"unresolvable host", "http://flotilla-no-such-host.invalid/fleet.git", "", auth, gitrepo.ErrUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &gitrepo.Source{URL: tc.url, Branch: tc.branch, Auth: tc.auth, CacheDir: t.TempDir()}
			_, err := src.Sync(context.Background())
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), srv.Password(gitserver.Maintainer)) {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

func TestSyncCredentialsInURLAreNotLeaked(t *testing.T) {
	srv, _ := fleet(t, fleetFiles)
	pw := srv.Password(gitserver.Maintainer)
	url := "http://" + gitserver.Maintainer + ":" + pw + "@" + srv.Addr() + "/fleet.git"
	src := &gitrepo.Source{URL: url, CacheDir: t.TempDir()}
	if _, err := src.Sync(context.Background()); err != nil {
		t.Fatalf("sync with credentials in the URL: %v", err)
	}
	state, _ := os.ReadFile(filepath.Join(src.CacheDir, "state.json"))
	if strings.Contains(string(state), pw) {
		t.Fatal("state.json holds the password")
	}
	srv.Stop()
	_, err := src.Sync(context.Background())
	if err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("error = %v (must exist and not hold the password)", err)
	}
}

func TestSyncRecoversFromCorruptCache(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, cache string)
	}{
		{"packs deleted", func(t *testing.T, cache string) {
			packs, _ := filepath.Glob(filepath.Join(cache, "repo", "objects", "pack", "*"))
			if len(packs) == 0 {
				t.Fatal("no packs to delete")
			}
			for _, p := range packs {
				os.Remove(p)
			}
		}},
		{"packs truncated", func(t *testing.T, cache string) {
			packs, _ := filepath.Glob(filepath.Join(cache, "repo", "objects", "pack", "*.pack"))
			for _, p := range packs {
				os.Truncate(p, 40)
			}
		}},
		{"garbage config and HEAD", func(t *testing.T, cache string) {
			os.WriteFile(filepath.Join(cache, "repo", "config"), []byte("[[[ not git"), 0o644)
			os.WriteFile(filepath.Join(cache, "repo", "HEAD"), []byte("\x00\x01"), 0o644)
		}},
		{"repo removed", func(t *testing.T, cache string) { os.RemoveAll(filepath.Join(cache, "repo")) }},
		{"state garbage", func(t *testing.T, cache string) {
			os.WriteFile(filepath.Join(cache, "state.json"), []byte("{not json"), 0o644)
		}},
		{"checkouts removed", func(t *testing.T, cache string) { os.RemoveAll(filepath.Join(cache, "checkouts")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, auth := fleet(t, fleetFiles)
			ctx := context.Background()
			cache := t.TempDir()
			src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache}
			if _, err := src.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			tc.corrupt(t, cache)
			next := commitMain(t, srv, map[string][]byte{"after.yaml": []byte("after\n")})
			restarted := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: cache}
			res, err := restarted.Sync(ctx)
			if err != nil {
				t.Fatalf("sync on a corrupt cache: %v", err)
			}
			want := map[string]string{"after.yaml": "after\n"}
			for k, v := range fleetFiles {
				want[k] = v
			}
			if res.Hash != next || !equalFiles(readDir(t, res.Dir), want) {
				t.Fatalf("result %+v, files %v", res, readDir(t, res.Dir))
			}
		})
	}
}

func TestSyncPathsAndFileModes(t *testing.T) {
	srv, auth := fleet(t, fleetFiles)
	// Executable bits and symlinks (one pointing outside the repo) come
	// through as they are; judging the link is the renderer's job.
	work := t.TempDir()
	git(t, work, "clone", "-q", srv.UserURL("fleet", gitserver.Maintainer), "w")
	w := filepath.Join(work, "w")
	os.WriteFile(filepath.Join(w, "rendered/member1/run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("../../etc/passwd", filepath.Join(w, "rendered/member1/escape"))
	os.Symlink("slice.yaml", filepath.Join(w, "rendered/member1/alias.yaml"))
	git(t, w, "add", "-A")
	git(t, w, "commit", "-q", "-m", "modes")
	git(t, w, "push", "-q", "origin", "HEAD:main")

	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir(), Paths: []string{"rendered/member1", "charts"}}
	res, err := src.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := readDir(t, res.Dir)
	want := map[string]string{
		"rendered/member1/slice.yaml":    "units: [web]\n",
		"rendered/member1/web/kust.yaml": "resources: []\n",
		"rendered/member1/run.sh":        "#!/bin/sh\n",
		"charts/web/Chart.yaml":          "name: web\n",
	}
	if !equalFiles(got, want) {
		t.Fatalf("checkout with Paths = %v", got)
	}
	fi, err := os.Stat(filepath.Join(res.Dir, "rendered/member1/run.sh"))
	if err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("run.sh lost its executable bit: %v %v", fi.Mode(), err)
	}
	for link, target := range map[string]string{"escape": "../../etc/passwd", "alias.yaml": "slice.yaml"} {
		got, err := os.Readlink(filepath.Join(res.Dir, "rendered/member1", link))
		if err != nil || got != target {
			t.Fatalf("symlink %s -> %q, %v; want %q", link, got, err, target)
		}
	}
}

func TestSyncCompactsTheCache(t *testing.T) {
	defer gitrepo.SetMaxPacks(2)()
	srv, auth := fleet(t, fleetFiles)
	ctx := context.Background()
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir()}
	var last gitrepo.Result
	for i := 0; i < 5; i++ {
		if i > 0 {
			commitMain(t, srv, map[string][]byte{"counter": []byte(strings.Repeat("x", i) + "\n")})
		}
		res, err := src.Sync(ctx)
		if err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
		last = res
	}
	packs, _ := filepath.Glob(filepath.Join(src.CacheDir, "repo", "objects", "pack", "*.pack"))
	if len(packs) > 2 {
		t.Fatalf("%d packs after 5 fetches: no compaction", len(packs))
	}
	checkouts, _ := os.ReadDir(filepath.Join(src.CacheDir, "checkouts"))
	if len(checkouts) != 2 {
		t.Fatalf("%d checkouts kept, want 2", len(checkouts))
	}
	if readDir(t, last.Dir)["counter"] != strings.Repeat("x", 4)+"\n" {
		t.Fatal("wrong content after compaction")
	}
	// The compacted cache still serves an unchanged head without a fetch,
	// and the next change with one.
	before := srv.Stats("fleet")
	if res, err := src.Sync(ctx); err != nil || res.Fetched {
		t.Fatalf("idle sync after compaction: %+v, %v", res, err)
	}
	if d := srv.Stats("fleet").Sub(before); d.UploadPacks != 0 {
		t.Fatalf("idle sync after compaction fetched: %+v", d)
	}
	next := commitMain(t, srv, map[string][]byte{"counter": []byte("done\n")})
	res, err := src.Sync(ctx)
	if err != nil || res.Hash != next || readDir(t, res.Dir)["counter"] != "done\n" {
		t.Fatalf("sync after compaction: %+v, %v", res, err)
	}
}

func TestCommitsBetweenDeepens(t *testing.T) {
	srv, auth := fleet(t, fleetFiles)
	ctx := context.Background()
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir()}
	first, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < 5; i++ {
		want = append([]string{commitMain(t, srv, map[string][]byte{"n": []byte(strings.Repeat("n", i+1))})}, want...)
	}
	// A fresh cache, so the range is beyond its shallow boundary.
	src = &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir()}
	head, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commits, err := src.CommitsBetween(ctx, first.Hash, head.Hash)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range commits {
		got = append(got, c.Hash)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("CommitsBetween = %v, want %v", got, want)
	}
	if none, err := src.CommitsBetween(ctx, head.Hash, head.Hash); err != nil || len(none) != 0 {
		t.Fatalf("empty range = %v, %v", none, err)
	}
	if c, err := src.Commit(head.Hash); err != nil || c.Hash != head.Hash || len(c.Parents) != 1 {
		t.Fatalf("Commit(head) = %+v, %v", c, err)
	}

	// Rewritten history: the old head is no ancestor of the new one.
	ctxb := context.Background()
	if _, err := srv.Push(ctxb, "fleet", gitserver.Maintainer, gitserver.Change{Branch: "feature", Files: map[string]string{"f": "1"}}); err != nil {
		t.Fatal(err)
	}
	fsrc := &gitrepo.Source{URL: srv.URL("fleet"), Branch: "feature", Auth: auth, CacheDir: t.TempDir()}
	old, err := fsrc.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Push(ctxb, "fleet", gitserver.Maintainer, gitserver.Change{Branch: "feature", Orphan: true, Force: true, Files: map[string]string{"g": "2"}}); err != nil {
		t.Fatal(err)
	}
	rewritten, err := fsrc.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsrc.CommitsBetween(ctx, old.Hash, rewritten.Hash); !errors.Is(err, gitrepo.ErrNotAncestor) {
		t.Fatalf("range over rewritten history: %v, want ErrNotAncestor", err)
	}
}

func TestCheckoutOfAnOlderCommit(t *testing.T) {
	srv, auth := fleet(t, fleetFiles)
	ctx := context.Background()
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir()}
	old, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		commitMain(t, srv, map[string][]byte{"n": []byte(strings.Repeat("n", i+1))})
	}
	// A fresh, empty cache (a restarted pod): the commit is fetched.
	src = &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir()}
	res, err := src.Checkout(ctx, old.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if res.Hash != old.Hash || res.Revision != old.Revision || !reflect.DeepEqual(readDir(t, res.Dir), readDir(t, old.Dir)) {
		t.Fatalf("Checkout = %+v, want the tree of %+v", res, old)
	}
	if _, ok := src.LastGood(); ok {
		t.Error("Checkout changed LastGood")
	}
	// From the cache again once its directory is gone, and Sync still
	// brings the head.
	if err := os.RemoveAll(res.Dir); err != nil {
		t.Fatal(err)
	}
	if again, err := src.Checkout(ctx, old.Hash); err != nil || again.Dir != res.Dir || !reflect.DeepEqual(readDir(t, again.Dir), readDir(t, old.Dir)) {
		t.Fatalf("Checkout again = %+v, %v", again, err)
	}
	if head, err := src.Sync(ctx); err != nil || head.Hash == old.Hash {
		t.Fatalf("Sync after Checkout = %+v, %v", head, err)
	}
	if _, err := src.Checkout(ctx, strings.Repeat("0", 40)); !errors.Is(err, gitrepo.ErrRevisionNotFound) {
		t.Fatalf("Checkout of an unknown commit: %v", err)
	}
}

// TestHeldCheckoutOutlivesSyncs: a held checkout stays on disk while
// syncs move past it (the agent renders from it while it polls during
// health waits); released, the next sync removes it as usual.
func TestHeldCheckoutOutlivesSyncs(t *testing.T) {
	srv, auth := fleet(t, fleetFiles)
	ctx := context.Background()
	src := &gitrepo.Source{URL: srv.URL("fleet"), Auth: auth, CacheDir: t.TempDir()}
	held, err := src.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release := src.Hold(held.Dir)
	want := readDir(t, held.Dir)
	for i := 0; i < 3; i++ {
		commitMain(t, srv, map[string][]byte{"n": []byte(strings.Repeat("n", i+1))})
		if _, err := src.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := readDir(t, held.Dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("held checkout changed or was removed after three syncs: %v", got)
	}
	release()
	release() // idempotent
	commitMain(t, srv, map[string][]byte{"n": []byte("released")})
	if _, err := src.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(held.Dir); !os.IsNotExist(err) {
		t.Fatalf("released checkout still on disk after a sync: %v", err)
	}
	// A directory that is no checkout of this source holds nothing.
	src.Hold(t.TempDir())()
}
