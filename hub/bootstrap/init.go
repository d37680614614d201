package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/flotilla-gitops/flotilla"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

// InitOptions configure Init.
type InitOptions struct {
	// Force writes into a directory that already holds files; template
	// files overwrite files of the same name, other files are left alone.
	Force bool
	// Git makes the directory a Git repository with the template as its
	// first commit on Branch.
	Git bool
	// Branch of the first commit; "main" when empty.
	Branch string
	// Author of the first commit; empty fields come from the user's Git
	// configuration.
	Author gitrepo.Signature
	// Template replaces the embedded fleet-repo-template (tests).
	Template fs.FS
}

// InitResult says what Init did.
type InitResult struct {
	// Files written, slash-separated and relative to the directory, sorted.
	Files []string
	// Commit is the first commit's hash when InitOptions.Git was set.
	Commit string
}

// Init creates a fleet repo in dir from the template. dir is created when
// missing; a directory that holds anything is refused with ErrNotEmpty
// unless opts.Force.
func Init(ctx context.Context, dir string, opts InitOptions) (InitResult, error) {
	tmpl := opts.Template
	if tmpl == nil {
		tmpl = flotilla.FleetRepoTemplate()
	}
	if err := checkEmpty(dir, opts.Force); err != nil {
		return InitResult{}, err
	}
	if opts.Git {
		// Refuse before writing anything, so a failed init leaves no half
		// repository behind.
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return InitResult{}, fmt.Errorf("init %s: %w", dir, gitrepo.ErrRepoExists)
		}
	}
	files, err := copyFS(ctx, dir, tmpl)
	if err != nil {
		return InitResult{}, fmt.Errorf("init %s: %w", dir, err)
	}
	res := InitResult{Files: files}
	if opts.Git {
		branch := opts.Branch
		if branch == "" {
			branch = DefaultBranch
		}
		res.Commit, err = gitrepo.InitRepository(ctx, dir, branch, "Create the fleet repo from the Flotilla template", opts.Author)
		if err != nil {
			return res, fmt.Errorf("init %s: %w", dir, err)
		}
	}
	return res, nil
}

// checkEmpty creates dir if needed and refuses one with entries unless
// force.
func checkEmpty(dir string, force bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	if len(entries) > 0 && !force {
		return fmt.Errorf("%s: %w (%d entries; use --force to write into it)", dir, ErrNotEmpty, len(entries))
	}
	return nil
}

// copyFS writes every regular file of src under dir and returns their
// paths. fs.FS paths are clean and relative by contract, so nothing can
// land outside dir.
func copyFS(ctx context.Context, dir string, src fs.FS) ([]string, error) {
	var files []string
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(dst, data); err != nil {
			return err
		}
		files = append(files, p)
		return nil
	})
	sort.Strings(files)
	return files, err
}

// writeFileAtomic replaces path with data through a temporary file and a
// rename, so a reader (or a crash) never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
