package gitrepo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// dirDigest is a sha256 over a checkout directory: every entry's path,
// type, executable bit and content (a symlink's target), in WalkDir's
// lexical order. It is recorded when a checkout is exported and checked
// when one is reused, so a checkout damaged or altered on disk is exported
// again instead of being applied.
func dirDigest(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch t := d.Type(); {
		case d.IsDir():
			fmt.Fprintf(h, "d %s\x00", rel)
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "l %s\x00%s\x00", rel, target)
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "f %s %v %d\x00", rel, fi.Mode().Perm()&0o111 != 0, fi.Size())
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: unexpected file type %s", rel, t)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("digest of %s: %w", dir, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// checkoutIntact reports whether the checkout dir still has the digest
// recorded for key. A checkout without a recorded digest (written by an
// older agent) is taken as it is, so that an upgraded agent offline still
// has its last good revision.
func (s *Source) checkoutIntact(key, dir string) bool {
	st, err := s.readState()
	if err != nil {
		return false
	}
	want, ok := st.Digests[key]
	if !ok {
		return true
	}
	got, err := dirDigest(dir)
	return err == nil && got == want
}
