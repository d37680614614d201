package kuratorimport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrExists is returned by Write when files would be overwritten without force.
var ErrExists = errors.New("files exist")

// Write writes res under root. Without force it first checks that no file
// exists and writes nothing if one does. Files are written to temporary
// names and renamed only once all were written, so a failure leaves no
// partial import behind (only directories it created).
func Write(root string, res *Result, force bool) error {
	paths := res.Paths()
	var exist []string
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p))); err == nil {
			exist = append(exist, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("check %s: %w", p, err)
		}
	}
	if len(exist) > 0 && !force {
		return fmt.Errorf("%w in %s: %s (use --force to overwrite)", ErrExists, root, strings.Join(exist, ", "))
	}
	var temps []string
	cleanup := func() {
		for _, t := range temps {
			_ = os.Remove(t)
		}
	}
	for _, p := range paths {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			cleanup()
			return fmt.Errorf("write %s: %w", p, err)
		}
		f, err := os.CreateTemp(filepath.Dir(full), ".import-*")
		if err != nil {
			cleanup()
			return fmt.Errorf("write %s: %w", p, err)
		}
		temps = append(temps, f.Name())
		_, err = f.Write(res.Files[p])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(f.Name(), 0o644)
		}
		if err != nil {
			cleanup()
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	for i, p := range paths {
		if err := os.Rename(temps[i], filepath.Join(root, filepath.FromSlash(p))); err != nil {
			cleanup()
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}
