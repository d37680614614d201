package gitrepo

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"
)

// stagedObjects reads through to a repository's objects and keeps the
// objects written to it in memory, skipping those the repository already
// has, until writePack stores them all as one pack.
type stagedObjects struct {
	*memory.ObjectStorage
	base storer.EncodedObjectStorer
}

func newStagedObjects(base storer.EncodedObjectStorer) *stagedObjects {
	mem := memory.NewStorage()
	return &stagedObjects{ObjectStorage: &mem.ObjectStorage, base: base}
}

func (s *stagedObjects) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	if s.base.HasEncodedObject(o.Hash()) == nil {
		return o.Hash(), nil
	}
	return s.ObjectStorage.SetEncodedObject(o)
}

func (s *stagedObjects) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := s.ObjectStorage.EncodedObject(t, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return s.base.EncodedObject(t, h)
	}
	return o, err
}

func (s *stagedObjects) HasEncodedObject(h plumbing.Hash) error {
	if s.ObjectStorage.HasEncodedObject(h) == nil {
		return nil
	}
	return s.base.HasEncodedObject(h)
}

func (s *stagedObjects) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	n, err := s.ObjectStorage.EncodedObjectSize(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return s.base.EncodedObjectSize(h)
	}
	return n, err
}

// writePack stores the staged objects in the base repository: one pack
// when it takes packs (a repository on disk), else object by object.
func (s *stagedObjects) writePack() error {
	hashes := make([]plumbing.Hash, 0, len(s.Objects))
	for h := range s.Objects {
		hashes = append(hashes, h)
	}
	if len(hashes) == 0 {
		return nil
	}
	pw, ok := s.base.(storer.PackfileWriter)
	if !ok {
		for _, h := range hashes {
			if _, err := s.base.SetEncodedObject(s.Objects[h]); err != nil {
				return err
			}
		}
		return nil
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		return err
	}
	// No delta search: the pack is local; a push computes its own.
	if _, err := packfile.NewEncoder(w, s.ObjectStorage, false).Encode(hashes, 0); err != nil {
		w.Close()
		return fmt.Errorf("pack %d objects: %w", len(hashes), err)
	}
	return w.Close()
}
