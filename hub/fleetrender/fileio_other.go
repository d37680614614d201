//go:build !unix

package fleetrender

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

func sameContent(p string, want []byte) (bool, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() || fi.Size() != int64(len(want)) {
		return false, nil
	}
	got, err := os.ReadFile(p)
	if err != nil {
		return false, err
	}
	return bytes.Equal(got, want), nil
}

func writeAtomic(dst string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(dst), tempPrefix+filepath.Base(dst))
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return nil
}

func mkdir(p string) error {
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}

func writeNew(p string, data []byte) error {
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}
