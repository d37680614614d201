package fleetrender_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// treeFiles returns every file under root/rendered with its content.
func treeFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	base := filepath.Join(root, slice.RenderedDir)
	err := filepath.WalkDir(base, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

// ageTree sets every rendered file's mtime an hour back, so a rewrite is
// visible.
func ageTree(t *testing.T, root string) time.Time {
	t.Helper()
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for p := range treeFiles(t, root) {
		if err := os.Chtimes(filepath.Join(root, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	return old
}

func rewritten(t *testing.T, root string, old time.Time) []string {
	t.Helper()
	var out []string
	for p := range treeFiles(t, root) {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(old) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func write(t *testing.T, root string, out *fleetrender.Output, check bool) fleetrender.Changes {
	t.Helper()
	ch, err := fleetrender.Write(context.Background(), root, out, fleetrender.WriteOptions{Check: check})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestWriteDeterministic: two renders of the same repo, in two copies, are
// byte-identical; every file starts with the generated header.
func TestWriteDeterministic(t *testing.T) {
	a := copyTree(t, templateDir)
	b := copyTree(t, templateDir)
	for _, root := range []string{a, b} {
		if err := os.RemoveAll(filepath.Join(root, slice.RenderedDir)); err != nil {
			t.Fatal(err)
		}
		write(t, root, compileRepo(t, root, fleetrender.Options{}), false)
	}
	ta, tb := treeFiles(t, a), treeFiles(t, b)
	if len(ta) == 0 || !reflect.DeepEqual(ta, tb) {
		t.Fatalf("two renders differ (%d vs %d files)", len(ta), len(tb))
	}
	committed := treeFiles(t, templateDir)
	if !reflect.DeepEqual(ta, committed) {
		t.Errorf("a fresh render differs from the committed fleet-repo-template/rendered")
	}
	for p, content := range ta {
		if !strings.HasPrefix(content, slice.GeneratedHeader+"\n") {
			t.Errorf("%s does not start with the generated header", p)
		}
	}
	// Rendering again changes nothing and touches nothing.
	old := ageTree(t, a)
	if ch := write(t, a, compileRepo(t, a, fleetrender.Options{}), false); !ch.Empty() {
		t.Errorf("second render changed %v", ch.All())
	}
	if got := rewritten(t, a, old); len(got) != 0 {
		t.Errorf("second render rewrote %v", got)
	}
}

// TestWriteRewritesOnlyTargetedClusters: after one application changes,
// only the files of the clusters it targets are rewritten.
func TestWriteRewritesOnlyTargetedClusters(t *testing.T) {
	root := copyTree(t, templateDir)
	write(t, root, compileRepo(t, root, fleetrender.Options{}), false)
	old := ageTree(t, root)

	// iot-collector runs on all three clusters; its cloud policy on member1
	// and member2 only. Changing the cloud replica count changes those two
	// clusters' iot-collector kustomization and slice.yaml (the unit hash).
	app := filepath.Join(root, "apps", "iot-collector", "app.yaml")
	data, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "count: 3", "count: 4", 1)
	if edited == string(data) {
		t.Fatal("fixture changed: no 'count: 3' in iot-collector/app.yaml")
	}
	if err := os.WriteFile(app, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	ch := write(t, root, compileRepo(t, root, fleetrender.Options{}), false)
	want := []string{
		slice.SlicePath("member1"),
		slice.UnitDir("member1", "iot-collector") + "/kustomization.yaml",
		slice.SlicePath("member2"),
		slice.UnitDir("member2", "iot-collector") + "/kustomization.yaml",
	}
	sort.Strings(want)
	if !reflect.DeepEqual(ch.Changed, want) || len(ch.Added) != 0 || len(ch.Removed) != 0 {
		t.Errorf("changes = %+v, want changed %v", ch, want)
	}
	if got := rewritten(t, root, old); !reflect.DeepEqual(got, want) {
		t.Errorf("rewritten files = %v, want %v", got, want)
	}

	// A source change (not app.yaml) changes only the unit hashes, in the
	// slice.yaml of each cluster the application targets: all three.
	old = ageTree(t, root)
	dep := filepath.Join(root, "apps", "iot-collector", "manifests", "deployment.yaml")
	data, err = os.ReadFile(dep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dep, []byte(strings.Replace(string(data), "busybox:1.37", "busybox:1.36", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ch = write(t, root, compileRepo(t, root, fleetrender.Options{}), false)
	want = []string{slice.SlicePath("edge-1"), slice.SlicePath("member1"), slice.SlicePath("member2")}
	sort.Strings(want)
	if !reflect.DeepEqual(ch.All(), want) {
		t.Errorf("changes = %v, want %v", ch.All(), want)
	}
	if got := rewritten(t, root, old); !reflect.DeepEqual(got, want) {
		t.Errorf("rewritten files = %v, want %v", got, want)
	}
}

// TestWriteRemovesStale: files and directories no longer generated go,
// including a removed application's units and an unknown cluster.
func TestWriteRemovesStale(t *testing.T) {
	root := copyTree(t, templateDir)
	ghost := filepath.Join(root, filepath.FromSlash(slice.ClusterDir("ghost")))
	leftover := filepath.Join(root, filepath.FromSlash(slice.UnitDir("member1", "retired")))
	for _, d := range []string{ghost, leftover} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := []string{
		filepath.Join(ghost, "slice.yaml"),
		filepath.Join(leftover, "kustomization.yaml"),
		filepath.Join(root, filepath.FromSlash(slice.ClusterDir("member1")), ".flotilla-tmp-slice.yaml"),
	}
	for _, f := range files {
		if err := os.WriteFile(f, []byte("stale\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(root, "apps", "frontend-web")); err != nil {
		t.Fatal(err)
	}
	out := compileRepo(t, root, fleetrender.Options{})
	check := write(t, root, out, true)
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("check mode removed %s", f)
		}
	}
	ch := write(t, root, out, false)
	if !reflect.DeepEqual(ch, check) {
		t.Errorf("check reported %+v, write did %+v", check, ch)
	}
	wantRemoved := []string{
		slice.UnitDir("member1", "frontend-web") + "/kustomization.yaml",
		slice.UnitDir("member1", "retired") + "/kustomization.yaml",
		slice.ClusterDir("member1") + "/.flotilla-tmp-slice.yaml",
		slice.UnitDir("member2", "frontend-web") + "/kustomization.yaml",
		slice.SlicePath("ghost"),
	}
	sort.Strings(wantRemoved)
	if !reflect.DeepEqual(ch.Removed, wantRemoved) {
		t.Errorf("removed = %v, want %v", ch.Removed, wantRemoved)
	}
	for _, d := range []string{ghost, leftover, filepath.Join(root, filepath.FromSlash(slice.UnitDir("member2", "frontend-web")))} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists (%v)", d, err)
		}
	}
	if ch := write(t, root, compileRepo(t, root, fleetrender.Options{}), true); !ch.Empty() {
		t.Errorf("after the write, check still finds %v", ch.All())
	}
}

// TestWriteScope: a render limited to some clusters leaves the other
// clusters' directories alone, stale or not.
func TestWriteScope(t *testing.T) {
	root := copyTree(t, templateDir)
	stranger := filepath.Join(root, filepath.FromSlash(slice.SlicePath("ghost")))
	if err := os.MkdirAll(filepath.Dir(stranger), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stranger, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m2 := filepath.Join(root, filepath.FromSlash(slice.SlicePath("member2")))
	if err := os.WriteFile(m2, []byte("edited by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(root, filepath.FromSlash(slice.UnitDir("member1", "retired")), "kustomization.yaml")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := compileRepo(t, root, fleetrender.Options{Clusters: []string{"member1"}})
	if len(out.Clusters) != 1 || !reflect.DeepEqual(out.Scope, []string{"member1"}) {
		t.Fatalf("compiled %d clusters, scope %v", len(out.Clusters), out.Scope)
	}
	ch := write(t, root, out, false)
	if want := []string{slice.UnitDir("member1", "retired") + "/kustomization.yaml"}; !reflect.DeepEqual(ch.All(), want) {
		t.Errorf("changes = %v, want %v", ch.All(), want)
	}
	for _, f := range []string{stranger, m2} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s outside the scope was touched: %v", f, err)
		}
	}
	if data, _ := os.ReadFile(m2); string(data) != "edited by hand\n" {
		t.Errorf("member2's slice.yaml outside the scope was rewritten")
	}
}

// TestWriteRefusesUnsafePaths: nothing is written when any path is bad.
func TestWriteRefusesUnsafePaths(t *testing.T) {
	root := t.TempDir()
	for _, bad := range []string{"rendered/../escape.yaml", "other/file.yaml", "/abs/rendered/x", "rendered/a/./b"} {
		out := &fleetrender.Output{Clusters: []*fleetrender.ClusterOutput{{
			Slice: &slice.Slice{},
			Files: []fleetrender.File{{Path: "rendered/aa/ok/slice.yaml", Data: []byte("ok\n")}, {Path: bad, Data: []byte("x\n")}},
		}}}
		_, err := fleetrender.Write(context.Background(), root, out, fleetrender.WriteOptions{})
		if !errors.Is(err, fleetrender.ErrUnsafePath) {
			t.Errorf("%s: err = %v, want ErrUnsafePath", bad, err)
		}
		if _, err := os.Stat(filepath.Join(root, "rendered")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: something was written", bad)
		}
	}
}

// TestWriteReplacesSymlink: a symlink where a generated file belongs is
// replaced by a regular file, never written through.
func TestWriteReplacesSymlink(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "outside.txt")
	if err := os.WriteFile(target, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "rendered", "aa", "c", "slice.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	out := &fleetrender.Output{Clusters: []*fleetrender.ClusterOutput{{Slice: &slice.Slice{},
		Files: []fleetrender.File{{Path: "rendered/aa/c/slice.yaml", Data: []byte("precious\n")}}}}}
	ch := write(t, root, out, false)
	if !reflect.DeepEqual(ch.Changed, []string{"rendered/aa/c/slice.yaml"}) {
		t.Errorf("changes = %+v", ch)
	}
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		t.Errorf("slice.yaml is not a regular file: %v %v", fi, err)
	}
	if data, _ := os.ReadFile(target); string(data) != "precious\n" {
		t.Errorf("the symlink target was written")
	}
}

// TestWriteNewDirectories: a missing unit directory of an existing cluster
// and a missing cluster are rebuilt (staged under a temporary name and
// renamed into place), and leftovers of an interrupted write are removed.
func TestWriteNewDirectories(t *testing.T) {
	root := copyTree(t, templateDir)
	unit := filepath.Join(root, filepath.FromSlash(slice.UnitDir("member1", "mysql-db")))
	cluster := filepath.Join(root, filepath.FromSlash(slice.ClusterDir("edge-1")))
	for _, d := range []string{unit, cluster} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	leftover := filepath.Join(filepath.Dir(cluster), ".flotilla-tmp-edge-1", "iot-collector")
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leftover, "kustomization.yaml"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch := write(t, root, compileRepo(t, root, fleetrender.Options{}), false)
	if len(ch.Added) != 2+6 || len(ch.Changed) != 0 || len(ch.Removed) != 1 {
		t.Errorf("changes = %+v", ch)
	}
	if got, want := treeFiles(t, root), treeFiles(t, templateDir); !reflect.DeepEqual(got, want) {
		t.Errorf("the rebuilt tree differs from the committed one")
	}
	if _, err := os.Stat(filepath.Dir(leftover)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover temporary directory still there: %v", err)
	}
}
