package cmd

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// TestPublishTemplate: publish cuts one slice ref per cluster of the
// template; an agent's Source following member1's gets exactly the paths
// its slice reads (its rendered directory, the sources its units use),
// reported as main's commit; publishing again changes nothing.
func TestPublishTemplate(t *testing.T) {
	repo := planTemplateRepo(t)
	head, err := gitrepo.ResolveRevision(repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := planCLI(t, "publish", "--repo", repo, "--rev", "main")
	if code != ExitOK || !strings.Contains(stdout, "cut 3 slices of "+head) {
		t.Fatalf("publish: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	first, err := gitrepo.ResolveRevision(repo, gitrepo.SliceRef("member1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, code := planCLI(t, "publish", "--repo", repo, "--rev", "main"); code != ExitOK {
		t.Fatalf("publish again: exit %d", code)
	}
	if again, _ := gitrepo.ResolveRevision(repo, gitrepo.SliceRef("member1")); again != first {
		t.Errorf("publishing the same commit again moved the slice ref: %s → %s", first, again)
	}

	src := &gitrepo.Source{URL: "file://" + repo, CacheDir: t.TempDir(), Ref: gitrepo.SliceRef("member1"), Protocol: gitrepo.ProtocolV0}
	res, err := src.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Hash != head {
		t.Fatalf("slice sync reports %s, want main's %s", res.Hash, head)
	}
	s, err := slice.Read(repo, "member1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	entries, err := os.ReadDir(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		got = append(got, e.Name())
	}
	// The slice leaves out what no unit reads (an application's app.yaml),
	// and a directory that holds nothing else.
	excluded := map[string]bool{}
	for _, x := range s.RepoExclusions() {
		excluded[x] = true
		if _, err := os.Stat(filepath.Join(res.Dir, filepath.FromSlash(x))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("slice checkout has %s, which no unit reads: %v", x, err)
		}
	}
	want := map[string]bool{}
	for _, p := range s.RepoPaths() {
		if onlyExcluded(t, repo, p, excluded) {
			continue
		}
		want[strings.Split(p, "/")[0]] = true
		if _, err := os.Stat(filepath.Join(res.Dir, filepath.FromSlash(p))); err != nil {
			t.Errorf("slice checkout lacks %s: %v", p, err)
		}
	}
	if len(excluded) == 0 {
		t.Error("the template's slice leaves nothing out: the test proves nothing about exclusions")
	}
	var wantTop []string
	for _, e := range entries {
		if want[e.Name()] {
			wantTop = append(wantTop, e.Name())
		}
	}
	if !reflect.DeepEqual(got, wantTop) {
		t.Errorf("slice checkout's top level = %v, want only %v", got, wantTop)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, slice.ClusterDir("edge-1"))); err == nil {
		t.Error("member1's slice holds edge-1's directory")
	}
}

// onlyExcluded reports whether the directory p of the working tree repo
// holds nothing but excluded files.
func onlyExcluded(t *testing.T, repo, p string, excluded map[string]bool) bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(repo, filepath.FromSlash(p)))
	if err != nil {
		return false // a file, or missing: not a directory the cut leaves out
	}
	for _, e := range entries {
		if !excluded[p+"/"+e.Name()] {
			return false
		}
	}
	return true
}
