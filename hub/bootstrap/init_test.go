package bootstrap

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

const templateDir = "../../fleet-repo-template"

// templateFiles lists the checked-in template's regular files.
func templateFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(templateDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(templateDir, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// TestInitFromEmbeddedTemplate: init writes exactly the checked-in
// template (the embedded copy is the same), byte for byte, and the result
// is a valid fleet repo.
func TestInitFromEmbeddedTemplate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	res, err := Init(context.Background(), dir, InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := templateFiles(t)
	if !slices.Equal(res.Files, want) {
		t.Fatalf("init wrote %v,\nthe template holds %v", res.Files, want)
	}
	for _, f := range want {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		orig, err := os.ReadFile(filepath.Join(templateDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(orig) {
			t.Errorf("%s differs from the template", f)
		}
	}
	repo, err := fleet.Load(context.Background(), dir)
	if err != nil {
		t.Fatalf("the new fleet repo does not load: %v", err)
	}
	if repo.Cluster("member1") == nil || len(repo.Applications) == 0 {
		t.Errorf("loaded %d clusters, %d applications", len(repo.Clusters), len(repo.Applications))
	}
	if res.Commit != "" {
		t.Errorf("a commit without Git: %s", res.Commit)
	}
}

func TestInitRefusesNonEmptyUnlessForced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mine := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Init(ctx, dir, InitOptions{}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("init into a non-empty dir: %v, want ErrNotEmpty", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a refused init wrote %d entries", len(entries)-1)
	}

	// --force: template files win, others stay.
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Init(ctx, dir, InitOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(mine); string(b) != "mine" {
		t.Errorf("--force changed an unrelated file: %q", b)
	}
	if b, _ := os.ReadFile(readme); string(b) == "old" {
		t.Error("--force kept the old README.md")
	}
}

func TestInitGit(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "fleet")
	res, err := Init(ctx, dir, InitOptions{Git: true, Branch: "trunk", Author: gitrepo.Signature{Name: "Ada", Email: "ada@example.invalid"}})
	if err != nil {
		t.Fatal(err)
	}
	head, err := gitrepo.ResolveRevision(dir, "trunk")
	if err != nil || head != res.Commit {
		t.Fatalf("trunk = %s, %v; init reported %s", head, err, res.Commit)
	}
	exported := filepath.Join(t.TempDir(), "tree")
	if err := gitrepo.ExportTree(ctx, dir, head, exported); err != nil {
		t.Fatal(err)
	}
	var committed []string
	_ = filepath.WalkDir(exported, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(exported, p)
			committed = append(committed, filepath.ToSlash(rel))
		}
		return err
	})
	slices.Sort(committed)
	if !slices.Equal(committed, res.Files) {
		t.Errorf("the first commit holds %v,\ninit wrote %v", committed, res.Files)
	}
	c, err := gitrepo.ReadCommit(dir, head)
	if err != nil || c.Author.Name != "Ada" || len(c.Parents) != 0 {
		t.Errorf("first commit %+v, %v", c, err)
	}

	// A second --git init (forced) must not touch the existing repository.
	if _, err := Init(ctx, dir, InitOptions{Git: true, Force: true}); !errors.Is(err, gitrepo.ErrRepoExists) {
		t.Errorf("init --git over a repository: %v, want ErrRepoExists", err)
	}
	if again, _ := gitrepo.ResolveRevision(dir, "trunk"); again != head {
		t.Errorf("trunk moved to %s", again)
	}
}
