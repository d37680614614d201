package gitrepo_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

func TestReadRefs(t *testing.T) {
	clusters := []string{"member1", "member2", "edge1"}
	srv, maint := fleet(t, fleetFiles, clusters...)
	ctx := context.Background()
	hashes := map[string]string{}
	for _, c := range clusters {
		res, err := gitrepo.PushFiles(ctx, srv.URL("fleet"), statusRef(c), map[string][]byte{"status.yaml": []byte("cluster: " + c + "\n")}, "status", agent(c), gitrepo.PushOptions{Auth: userAuth(srv, gitserver.AgentUser(c))})
		if err != nil {
			t.Fatal(err)
		}
		hashes[c] = res.Hash
	}
	// A forged status: the maintainer (who may push any branch) writes
	// member2's ref with an extra file.
	forged, err := gitrepo.PushFiles(ctx, srv.URL("fleet"), statusRef("member2"), map[string][]byte{
		"status.yaml": []byte("cluster: member2\nready: true\n"), "evil.yaml": []byte("x"),
	}, "totally legit", gitrepo.Signature{Name: "mallory"}, gitrepo.PushOptions{Auth: maint})
	if err != nil {
		t.Fatal(err)
	}
	hashes["member2"] = forged.Hash

	prefix := "refs/heads/flotilla/status/"
	check := func(t *testing.T, refs []gitrepo.RefFiles) {
		t.Helper()
		if len(refs) != 3 {
			t.Fatalf("%d refs: %+v", len(refs), refs)
		}
		for i, want := range []string{"edge1", "member1", "member2"} { // sorted
			r := refs[i]
			if r.Ref != prefix+want || r.Hash != hashes[want] || !r.FileFound {
				t.Fatalf("ref %d = %s %s found=%v", i, r.Ref, r.Hash, r.FileFound)
			}
			if !strings.HasPrefix(string(r.File), "cluster: "+want+"\n") {
				t.Fatalf("%s file = %q", want, r.File)
			}
			wantChanged := "status.yaml"
			if want == "member2" {
				wantChanged = "evil.yaml,status.yaml"
			}
			if got := strings.Join(r.Changed, ","); got != wantChanged {
				t.Fatalf("%s changed %s, want %s", want, got, wantChanged)
			}
			if r.Committer.When.IsZero() || r.Author.Name == "" {
				t.Fatalf("%s commit metadata = %+v", want, r.Commit)
			}
		}
		if refs[2].Author.Name != "mallory" || len(refs[2].Parents) != 1 {
			t.Fatalf("forged commit = %+v", refs[2].Commit)
		}
	}
	opts := gitrepo.ReadOptions{Auth: maint, File: "status.yaml", CacheDir: t.TempDir()}

	t.Run("remote", func(t *testing.T) {
		refs, err := gitrepo.ReadRefs(ctx, srv.URL("fleet"), prefix, opts)
		if err != nil {
			t.Fatal(err)
		}
		check(t, refs)
	})
	t.Run("remote again: no fetch", func(t *testing.T) {
		before := srv.Stats("fleet")
		refs, err := gitrepo.ReadRefs(ctx, srv.URL("fleet"), prefix, opts)
		if err != nil {
			t.Fatal(err)
		}
		check(t, refs)
		if d := srv.Stats("fleet").Sub(before); d.UploadPacks != 0 || d.InfoRefs != 1 {
			t.Fatalf("unchanged read requests = %+v", d)
		}
	})
	t.Run("a cache that lost objects its refs need starts again", func(t *testing.T) {
		objects := filepath.Join(opts.CacheDir, "objects")
		if _, err := os.Stat(objects); err != nil {
			t.Fatalf("cache layout: %v", err)
		}
		if err := os.RemoveAll(objects); err != nil {
			t.Fatal(err)
		}
		refs, err := gitrepo.ReadRefs(ctx, srv.URL("fleet"), prefix, opts)
		if err != nil {
			t.Fatal(err)
		}
		check(t, refs)
	})
	t.Run("local mirror", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "mirror.git")
		git(t, "", "clone", "-q", "--mirror", srv.UserURL("fleet", gitserver.Maintainer), dir)
		refs, err := gitrepo.ReadRefs(ctx, dir, prefix, gitrepo.ReadOptions{File: "status.yaml"})
		if err != nil {
			t.Fatal(err)
		}
		check(t, refs)
		// A push in progress: git's lock file beside the ref it updates,
		// holding the new hash, is not a ref of its own.
		lock := filepath.Join(dir, filepath.FromSlash(prefix), "member1.lock")
		if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(lock, []byte(hashes["edge1"]+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		refs, err = gitrepo.ReadRefs(ctx, dir, prefix, gitrepo.ReadOptions{File: "status.yaml"})
		if err != nil {
			t.Fatal(err)
		}
		check(t, refs)
	})
	t.Run("local clone reads remote-tracking refs", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "clone")
		git(t, "", "clone", "-q", srv.UserURL("fleet", gitserver.Maintainer), dir)
		refs, err := gitrepo.ReadRefs(ctx, filepath.Join(dir, "rendered"), "refs/remotes/origin/flotilla/status/", gitrepo.ReadOptions{File: "status.yaml"})
		if err != nil || len(refs) != 3 || refs[1].Hash != hashes["member1"] {
			t.Fatalf("refs = %+v, %v", refs, err)
		}
	})
	t.Run("changes and deletions are picked up", func(t *testing.T) {
		up, err := gitrepo.PushFiles(ctx, srv.URL("fleet"), statusRef("member1"), map[string][]byte{"status.yaml": []byte("cluster: member1\nv: 2\n")}, "s", agent("member1"), gitrepo.PushOptions{Auth: userAuth(srv, gitserver.AgentUser("member1"))})
		if err != nil {
			t.Fatal(err)
		}
		git(t, "", "push", "-q", srv.UserURL("fleet", gitserver.AgentUser("edge1")), ":"+statusRef("edge1"))
		refs, err := gitrepo.ReadRefs(ctx, srv.URL("fleet"), prefix, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) != 2 || refs[0].Hash != up.Hash || string(refs[0].File) != "cluster: member1\nv: 2\n" {
			t.Fatalf("after update and delete: %+v", refs)
		}
	})
	t.Run("no refs under prefix", func(t *testing.T) {
		refs, err := gitrepo.ReadRefs(ctx, srv.URL("fleet"), "refs/heads/nothing/", gitrepo.ReadOptions{Auth: maint})
		if err != nil || len(refs) != 0 {
			t.Fatalf("refs = %v, %v", refs, err)
		}
	})
}
