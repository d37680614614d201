package e2e_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hubcmd "github.com/flotilla-gitops/flotilla/hub/cmd"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/testkeys"
)

// hubPublish runs `flotilla publish` as CI does after a merge: in a fresh
// clone of the fleet repo (with the slice refs published so far), cutting
// main's head and pushing the slice refs as the maintainer.
func hubPublish(t *testing.T, repo *fleetrepo.Repo) {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "clone")
	for _, args := range [][]string{
		{"clone", "-q", "--bare", repo.Server.RepoPath(repo.Name), clone},
		{"--git-dir=" + clone, "fetch", "-q", repo.Server.RepoPath(repo.Name), "+" + gitrepo.SliceRefPrefix + "*:" + gitrepo.SliceRefPrefix + "*"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	creds := t.TempDir()
	for name, v := range map[string]string{"username": gitserver.Maintainer, "password": repo.Server.Password(gitserver.Maintainer)} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	root := hubcmd.NewRootCommand()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"publish", "--repo", clone, "--rev", "main", "--remote", repo.URL, "--git-credentials-dir", creds})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("flotilla publish: %v\n%s%s", err, out.String(), errb.String())
	}
}

// TestSliceTransport: an agent following its slice ref (--git-transport
// slice, over protocol v2) in head verification mode refuses an unsigned
// main commit and a slice that is not part of the main commit it names,
// applies a signed one, reports main's revision, polls without fetching
// while nothing changes, and corrects drift from its cached slice while
// Git is down.
func TestSliceTransport(t *testing.T) {
	alice := testkeys.SSH(t, "alice@example.com")
	srv := newGitServer(t)
	r := newVerifyRigOn(t, srv, "slice-agent", "head", []string{"--git-transport", "slice"}, alice)
	r.afterPush = func() { hubPublish(t, r.repo) }
	hubPublish(t, r.repo)

	// The first commit of main is unsigned: refused, nothing applied.
	r.waitRefused(r.repo.Head(), "unsigned", "")

	signed := r.commit("signed-by-alice", &alice)
	st := r.waitApplied(signed, "signed-by-alice")
	if !strings.Contains(st.Verification.Signer, "alice@example.com") {
		t.Errorf("verification %+v", st.Verification)
	}

	// Idle: polls are v2 ls-refs of the slice ref alone, no pack.
	before := srv.Stats(r.repo.Name)
	cycles := r.agent.countLogs("cycle finished")
	waitFor(t, 2*time.Minute, "two idle cycles", func() (bool, string) {
		n := r.agent.countLogs("cycle finished") - cycles
		return n >= 2, "cycles"
	})
	idle := srv.Stats(r.repo.Name).Sub(before)
	if idle.LsRefs == 0 || idle.InfoRefs != 0 || idle.UploadPacks != 0 {
		t.Errorf("idle Git requests %+v: want only v2 ls-refs", idle)
	}

	unsigned := r.commit("unsigned", nil)
	r.waitRefused(unsigned, "unsigned", "signed-by-alice")

	// A publisher that alters the slice (the ConfigMap's value) while
	// naming a signed main commit is refused before verification: the
	// cluster keeps what it has.
	forged := r.commit("signed-again", &alice)
	r.waitApplied(forged, "signed-again")
	forgeSlice(t, srv.RepoPath(r.repo.Name), gitrepo.SliceRef(r.cluster), "apps/settings/manifests/configmap.yaml", "value: forged")
	r.agent.waitStatus(2*time.Minute, "the forged slice refused", func(st *status.ClusterStatus) bool {
		return strings.Contains(st.LastError, "does not match its main commit")
	})
	if got := r.value(); got != "signed-again" {
		t.Errorf("live value %q after a forged slice, want signed-again", got)
	}
	hubPublish(t, r.repo) // the publisher puts the true slice back (same main commit)

	// Offline: Git down, the ConfigMap edited, corrected from the cache.
	r.agent.waitStatus(2*time.Minute, "the true slice again", func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == forged && !strings.Contains(st.LastError, "does not match")
	})
	srv.Stop()
	r.agent.waitStatus(time.Minute, "the outage in status", func(st *status.ClusterStatus) bool {
		return strings.Contains(st.LastError, "unreachable")
	})
	r.driftCorrected("signed-again", "drift corrected offline from the cached slice")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
}

// TestStrictOverPublishedSlices: the default install (no transport flag)
// follows its slice ref once publish has cut it, and strict verification
// holds over it as on the branch: an unsigned commit between two signed
// ones is refused, and so it is by a new agent with an empty cache, which
// continues from the anchor recorded in the cluster.
func TestStrictOverPublishedSlices(t *testing.T) {
	alice := testkeys.SSH(t, "alice@example.com")
	srv := newGitServer(t)
	r := newVerifyRigOn(t, srv, "strict-slices", "strict", nil, alice)
	r.afterPush = func() { hubPublish(t, r.repo) }
	hashOf := func(rev string) string { return strings.TrimPrefix(rev, "main@sha1:") }
	hubPublish(t, r.repo)
	// The operator vouches for the (unsigned) initial commit.
	root := hashOf(r.repo.Head())
	r.restart("--verify-trust-root", root)

	first := r.commit("first", &alice)
	r.waitApplied(first, "first")
	second := r.commit("signed-2", &alice)
	r.waitApplied(second, "signed-2")
	followsSlice := func() bool {
		for _, rec := range r.agent.Records("git sync") {
			if rec["ref"] == gitrepo.SliceRef(r.cluster) {
				return true
			}
		}
		return false
	}
	if !followsSlice() {
		t.Fatalf("the agent did not follow its slice ref %s:\n%s", gitrepo.SliceRef(r.cluster), r.agent.LogTail(20))
	}

	r.commit("sneaked-in", nil)
	head := r.commit("signed-on-top", &alice)
	st := r.waitRefused(head, "unsigned", "signed-2")
	if !strings.Contains(st.Verification.Message, "not signed") {
		t.Errorf("verification %+v", st.Verification)
	}

	// A new pod: empty cache, the same trust root; the anchor in the
	// cluster, not the root, decides, and the unsigned commit is found
	// again from main's commit objects the slice transport fetches.
	r.restart("--verify-trust-root", root)
	r.waitRefused(head, "unsigned", "signed-2")
	if !followsSlice() {
		t.Fatalf("the restarted agent did not follow its slice ref:\n%s", r.agent.LogTail(20))
	}
}

// forgeSlice replaces ref's commit with one whose tree has file's content
// changed (old "value: …" line replaced by line), the message (and so the
// Flotilla-Source trailer) kept: what a compromised publisher could push.
func forgeSlice(t *testing.T, repo, ref, file, line string) {
	t.Helper()
	index := filepath.Join(t.TempDir(), "index")
	git := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"--git-dir=" + repo, "-c", "user.name=mallory", "-c", "user.email=m@example.com"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_INDEX_FILE="+index, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	old := git("", "show", ref+":"+file)
	lines := strings.Split(old, "\n")
	for i, l := range lines {
		if strings.Contains(l, "value:") {
			lines[i] = "  " + line
		}
	}
	blob := git(strings.Join(lines, "\n")+"\n", "hash-object", "-w", "--stdin")
	git("", "read-tree", ref+"^{tree}")
	git("", "update-index", "--cacheinfo", "100644,"+blob+","+file)
	commit := git("", "commit-tree", git("", "write-tree"), "-p", ref, "-m", git("", "log", "-1", "--format=%B", ref))
	git("", "update-ref", ref, commit)
}
