package gitrepo_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
)

func statusRef(cluster string) string { return gitserver.StatusRef(cluster) }

func agent(cluster string) gitrepo.Signature {
	return gitrepo.Signature{Name: "flotilla-agent " + cluster, Email: cluster + "@agents.flotilla.invalid"}
}

// refsUnchangedExcept fails unless before and after differ at most in ref.
func refsUnchangedExcept(t *testing.T, before, after map[string]string, refs ...string) {
	t.Helper()
	allowed := map[string]bool{}
	for _, r := range refs {
		allowed[r] = true
	}
	for k, v := range before {
		if !allowed[k] && after[k] != v {
			t.Fatalf("ref %s changed: %s -> %s", k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok && !allowed[k] {
			t.Fatalf("ref %s appeared", k)
		}
	}
}

func TestPushFiles(t *testing.T) {
	srv, _ := fleet(t, fleetFiles, "member1")
	ctx := context.Background()
	w := gitrepo.NewWriter(srv.URL("fleet"), gitrepo.PushOptions{Auth: userAuth(srv, gitserver.AgentUser("member1"))})
	ref := statusRef("member1")
	before, _ := srv.Refs("fleet")

	// A new ref: a root commit holding only the status file.
	res, err := w.PushFiles(ctx, ref, map[string][]byte{"status.yaml": []byte("ready: 1\n")}, "status", agent("member1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Unchanged || res.Attempts != 1 || srv.Head("fleet", "flotilla/status/member1") != res.Hash {
		t.Fatalf("first push = %+v", res)
	}
	if got := git(t, "", "--git-dir="+srv.RepoPath("fleet"), "ls-tree", "-r", "--name-only", res.Hash); got != "status.yaml" {
		t.Fatalf("tree of the status commit = %q", got)
	}
	if got := git(t, "", "--git-dir="+srv.RepoPath("fleet"), "rev-list", "--count", res.Hash); got != "1" {
		t.Fatalf("history = %s commits, want a root commit", got)
	}

	// An update: on top of the head, other files kept, nil deletes.
	statsBefore := srv.Stats("fleet")
	res2, err := w.PushFiles(ctx, ref, map[string][]byte{"status.yaml": []byte("ready: 2\n"), "extra/note.txt": []byte("n\n")}, "status 2", agent("member1"))
	if err != nil {
		t.Fatal(err)
	}
	steady := srv.Stats("fleet").Sub(statsBefore)
	if got := git(t, "", "--git-dir="+srv.RepoPath("fleet"), "rev-parse", res2.Hash+"^"); got != res.Hash {
		t.Fatalf("parent of the update = %s, want %s", got, res.Hash)
	}
	// A writer that knows the head pushes without fetching first.
	if steady.UploadPacks != 0 || steady.InfoRefs != 0 || steady.ReceivePacks != 1 {
		t.Fatalf("steady-state push requests = %+v", steady)
	}
	t.Logf("bytes pushed by one status commit: %d", steady.ReceivePackBytes)
	res3, err := w.PushFiles(ctx, ref, map[string][]byte{"extra/note.txt": nil}, "drop note", agent("member1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, "", "--git-dir="+srv.RepoPath("fleet"), "show", res3.Hash+":status.yaml"); got != "ready: 2" {
		t.Fatalf("status.yaml after delete of another file = %q", got)
	}
	if got := git(t, "", "--git-dir="+srv.RepoPath("fleet"), "ls-tree", "-r", "--name-only", res3.Hash); got != "status.yaml" {
		t.Fatalf("tree after delete = %q", got)
	}

	// Same content again: nothing pushed.
	statsBefore = srv.Stats("fleet")
	res4, err := w.PushFiles(ctx, ref, map[string][]byte{"status.yaml": []byte("ready: 2\n")}, "same", agent("member1"))
	if err != nil || !res4.Unchanged || res4.Hash != res3.Hash {
		t.Fatalf("unchanged push = %+v, %v", res4, err)
	}
	if d := srv.Stats("fleet").Sub(statsBefore); d.ReceivePacks != 0 {
		t.Fatalf("unchanged push sent a pack: %+v", d)
	}

	after, _ := srv.Refs("fleet")
	refsUnchangedExcept(t, before, after, ref)

	// Commit metadata.
	refs, err := gitrepo.ReadRefs(ctx, srv.RepoPath("fleet"), ref, gitrepo.ReadOptions{})
	if err != nil || len(refs) != 1 {
		t.Fatalf("ReadRefs = %v, %v", refs, err)
	}
	if a := refs[0].Author; a.Name != "flotilla-agent member1" || a.Email != "member1@agents.flotilla.invalid" || time.Since(a.When) > time.Minute {
		t.Fatalf("author = %+v", a)
	}
	if refs[0].Message != "drop note\n" {
		t.Fatalf("message = %q", refs[0].Message)
	}
}

func TestPushFilesRejectsUnsafePaths(t *testing.T) {
	w := gitrepo.NewWriter("http://127.0.0.1:1/x.git", gitrepo.PushOptions{})
	for _, p := range []string{"../x", "/etc/passwd", ".git/config", "a/.GIT/hooks/x", "", "a/../../b"} {
		_, err := w.PushFiles(context.Background(), "refs/heads/x", map[string][]byte{p: []byte("x")}, "m", agent("a"))
		if !errors.Is(err, gitrepo.ErrUnsafePath) {
			t.Errorf("path %q: err = %v, want ErrUnsafePath", p, err)
		}
	}
	if _, err := w.PushFiles(context.Background(), "main", nil, "m", agent("a")); err == nil {
		t.Error("a ref name without refs/ was accepted")
	}
}

func TestPushFilesRejected(t *testing.T) {
	srv, _ := fleet(t, fleetFiles, "member1", "member2")
	ctx := context.Background()
	w := gitrepo.NewWriter(srv.URL("fleet"), gitrepo.PushOptions{Auth: userAuth(srv, gitserver.AgentUser("member1"))})
	before, _ := srv.Refs("fleet")
	for _, ref := range []string{"refs/heads/main", statusRef("member2")} {
		_, err := w.PushFiles(ctx, ref, map[string][]byte{"status.yaml": []byte("forged\n")}, "forged", agent("member1"))
		if !errors.Is(err, gitrepo.ErrRejected) {
			t.Fatalf("push to %s: %v, want ErrRejected", ref, err)
		}
		if !strings.Contains(err.Error(), "may not push "+ref) {
			t.Fatalf("rejection lacks the server's reason: %v", err)
		}
	}
	after, _ := srv.Refs("fleet")
	refsUnchangedExcept(t, before, after)
	// The writer still works for its own ref.
	if _, err := w.PushFiles(ctx, statusRef("member1"), map[string][]byte{"status.yaml": []byte("ok\n")}, "ok", agent("member1")); err != nil {
		t.Fatal(err)
	}
}

func TestPushFilesConcurrent(t *testing.T) {
	const clusters, sameRefWriters = 6, 5
	var names []string
	for i := 0; i < clusters; i++ {
		names = append(names, fmt.Sprintf("c%d", i))
	}
	srv, maint := fleet(t, fleetFiles, names...)
	ctx := context.Background()
	before, _ := srv.Refs("fleet")
	opts := gitrepo.PushOptions{MaxAttempts: 30, Backoff: gitrepo.Backoff{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond}}

	var wg sync.WaitGroup
	errs := make(chan error, clusters+sameRefWriters)
	// Each agent on its own ref, twice.
	for _, c := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			o.Auth = userAuth(srv, gitserver.AgentUser(c))
			w := gitrepo.NewWriter(srv.URL("fleet"), o)
			for i := 1; i <= 2; i++ {
				if _, err := w.PushFiles(ctx, statusRef(c), map[string][]byte{"status.yaml": []byte(c + " " + strconv.Itoa(i) + "\n")}, "status", agent(c)); err != nil {
					errs <- fmt.Errorf("%s: %w", c, err)
				}
			}
		}()
	}
	// Several writers on one ref, each adding its own file: every commit
	// must land, rebased on the others.
	shared := "refs/heads/shared"
	for i := 0; i < sameRefWriters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			o.Auth = maint
			w := gitrepo.NewWriter(srv.URL("fleet"), o)
			name := fmt.Sprintf("w%d.txt", i)
			start := time.Now()
			res, err := w.PushFiles(ctx, shared, map[string][]byte{name: []byte(name)}, "add "+name, agent("shared"))
			if err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
			t.Logf("%s landed after %d attempts, %v", name, res.Attempts, time.Since(start).Round(time.Millisecond))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for _, c := range names {
		got := git(t, "", "--git-dir="+srv.RepoPath("fleet"), "show", statusRef(c)+":status.yaml")
		if got != c+" 2" {
			t.Fatalf("%s status = %q", c, got)
		}
	}
	files := strings.Fields(git(t, "", "--git-dir="+srv.RepoPath("fleet"), "ls-tree", "-r", "--name-only", shared))
	sort.Strings(files)
	if len(files) != sameRefWriters {
		t.Fatalf("shared ref holds %v, want %d files", files, sameRefWriters)
	}
	if got := git(t, "", "--git-dir="+srv.RepoPath("fleet"), "rev-list", "--count", shared); got != strconv.Itoa(sameRefWriters) {
		t.Fatalf("shared ref has %s commits, want %d", got, sameRefWriters)
	}
	after, _ := srv.Refs("fleet")
	allowed := []string{shared}
	for _, c := range names {
		allowed = append(allowed, statusRef(c))
	}
	refsUnchangedExcept(t, before, after, allowed...)
}

func TestPushFilesMaxHistory(t *testing.T) {
	srv, _ := fleet(t, fleetFiles, "member1")
	ctx := context.Background()
	opts := gitrepo.PushOptions{Auth: userAuth(srv, gitserver.AgentUser("member1")), MaxHistory: 3}
	ref := statusRef("member1")
	count := func() int {
		n, _ := strconv.Atoi(git(t, "", "--git-dir="+srv.RepoPath("fleet"), "rev-list", "--count", ref))
		return n
	}
	w := gitrepo.NewWriter(srv.URL("fleet"), opts)
	var squashed []int
	for i := 1; i <= 7; i++ {
		res, err := w.PushFiles(ctx, ref, map[string][]byte{"status.yaml": []byte(strconv.Itoa(i))}, "s", agent("member1"))
		if err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
		if res.Squashed {
			squashed = append(squashed, i)
		}
		if c := count(); c > 3 {
			t.Fatalf("after push %d the ref has %d commits", i, c)
		}
	}
	if fmt.Sprint(squashed) != "[4 7]" {
		t.Fatalf("squashed at pushes %v, want [4 7]", squashed)
	}
	// A restarted writer learns the history length from the remote.
	w2 := gitrepo.NewWriter(srv.URL("fleet"), opts)
	for i := 8; i <= 10; i++ {
		res, err := w2.PushFiles(ctx, ref, map[string][]byte{"status.yaml": []byte(strconv.Itoa(i))}, "s", agent("member1"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Squashed != (i == 10) {
			t.Fatalf("restarted writer push %d squashed=%v", i, res.Squashed)
		}
	}
	if got := git(t, "", "--git-dir="+srv.RepoPath("fleet"), "show", ref+":status.yaml"); got != "10" {
		t.Fatalf("content after squash = %q", got)
	}
}

func TestPushFilesOutage(t *testing.T) {
	srv, _ := fleet(t, fleetFiles, "member1")
	ctx := context.Background()
	w := gitrepo.NewWriter(srv.URL("fleet"), gitrepo.PushOptions{Auth: userAuth(srv, gitserver.AgentUser("member1"))})
	ref := statusRef("member1")
	if _, err := w.PushFiles(ctx, ref, map[string][]byte{"status.yaml": []byte("1")}, "s", agent("member1")); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	_, err := w.PushFiles(ctx, ref, map[string][]byte{"status.yaml": []byte("2")}, "s", agent("member1"))
	if !errors.Is(err, gitrepo.ErrUnreachable) {
		t.Fatalf("push while down: %v, want ErrUnreachable", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	res, err := w.PushFiles(ctx, ref, map[string][]byte{"status.yaml": []byte("3")}, "s", agent("member1"))
	if err != nil {
		t.Fatalf("push after recovery: %v", err)
	}
	if got := git(t, "", "--git-dir="+srv.RepoPath("fleet"), "rev-list", "--count", res.Hash); got != "2" {
		t.Fatalf("history after the outage = %s commits, want 2 (one per successful push)", got)
	}
}

func TestPushFilesToLocalBareRepo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "status.git")
	git(t, "", "init", "-q", "--bare", dir)
	res, err := gitrepo.PushFiles(context.Background(), dir, "refs/heads/flotilla/status/edge1",
		map[string][]byte{"status.yaml": []byte("edge\n")}, "s", agent("edge1"), gitrepo.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := git(t, "", "--git-dir="+dir, "rev-parse", "refs/heads/flotilla/status/edge1"); got != res.Hash {
		t.Fatalf("local push: ref %s, result %s", got, res.Hash)
	}
}
