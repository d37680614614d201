package e2e_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// corruptGitCache damages an agent's Git cache as a failing disk would:
// every pack truncated, garbage loose objects, and the unit's ConfigMap in
// the exported checkout rewritten to say color: evil. It returns how many
// files it changed.
func corruptGitCache(t *testing.T, cacheDir string) int {
	t.Helper()
	git := filepath.Join(cacheDir, "git")
	changed := 0
	packs, _ := filepath.Glob(filepath.Join(git, "repo", "objects", "pack", "*.pack"))
	for _, p := range packs {
		if err := os.Truncate(p, 64); err != nil {
			t.Fatal(err)
		}
		changed++
	}
	garbage := filepath.Join(git, "repo", "objects", "ab", strings.Repeat("c", 38))
	if err := os.MkdirAll(filepath.Dir(garbage), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbage, []byte("not a zlib stream"), 0o444); err != nil {
		t.Fatal(err)
	}
	changed++
	err := filepath.WalkDir(filepath.Join(git, "checkouts"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cm.yaml" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_ = os.Chmod(p, 0o644)
		changed++
		return os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "color: blue", "color: evil")), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return changed
}

// TestFaultCorruptGitCache corrupts the agent's Git cache between two runs
// (truncated packs, garbage objects, a tampered checkout): the restarted
// agent re-fetches rather than trusting it. The tampered content is never
// applied (the ConfigMap is not written at all: same resourceVersion), and
// the next commit is fetched and applied from the recovered cache.
func TestFaultCorruptGitCache(t *testing.T) {
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	k := c.Client()
	srv := agentGit(t)
	const cluster, ns, agentNS = "corrupt-cache", "corrupt-cache-app", "flotilla-corrupt-cache"
	dir, repo, creds := handAgentFleet(t, c, srv, cluster, ns, agentNS)
	cache := t.TempDir()
	args := []string{"--interval", "2s"}
	first := startAgentProc(t, c, repo, cluster, agentNS, "corrupt-cache-1", cache, creds, args...)
	rev := repo.Head()
	first.waitStatus(2*time.Minute, "the first revision applied", func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == rev && allUnitsReady(st)
	})
	if code := first.terminate(2 * time.Minute); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
	cm := &corev1.ConfigMap{}
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
		t.Fatal(err)
	}
	rv := cm.ResourceVersion
	n := corruptGitCache(t, cache)
	t.Logf("corrupted %d files of the cache", n)

	second := startAgentProc(t, c, repo, cluster, agentNS, "corrupt-cache-2", cache, creds, args...)
	second.waitStatus(2*time.Minute, "the restarted agent to reconcile", func(st *status.ClusterStatus) bool {
		return st.Agent.Identity == "corrupt-cache-2" && st.AppliedRevision == rev && allUnitsReady(st)
	})
	second.WaitCycle(second.Cycles()+1, 2*time.Minute)
	if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["color"] != "blue" || cm.ResourceVersion != rv {
		t.Errorf("after the restart on a corrupt cache: color %q resourceVersion %s (before %s): the tampered checkout was applied",
			cm.Data["color"], cm.ResourceVersion, rv)
	}

	// Drift is corrected to what Git says, not to the tampered checkout.
	editColor(t, k, ns, "red")
	waitFor(t, 2*time.Minute, "the drift corrected", func() (bool, string) {
		if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
			return false, err.Error()
		}
		return cm.Data["color"] != "red", cm.Data["color"]
	})
	if cm.Data["color"] != "blue" {
		t.Errorf("drift corrected to color %q, want blue: the tampered checkout was trusted", cm.Data["color"])
	}

	// The recovered cache follows the branch.
	writeHandSlice(t, dir, cluster, []handUnit{settingsUnit(ns, "green")})
	next := repo.Push(t, "green")
	second.waitStatus(2*time.Minute, "the next revision applied", func(st *status.ClusterStatus) bool {
		return st.AppliedRevision == next && allUnitsReady(st)
	})
	waitColor(t, k, ns, "green", 2*time.Minute)
}
