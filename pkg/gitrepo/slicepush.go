package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/storage"
)

// errNeedsWalk: pushSlicesExact cannot tell which objects the remote
// lacks; a push that walks the history must do.
var errNeedsWalk = errors.New("the remote's objects are not known")

// pushSlicesExact pushes every slice ref whose remote value differs, with
// a pack of the objects the remote lacks, found without walking main: a
// slice commit's kept entries are main's own objects, and main's commit is
// a ref tip of the remote, so the remote has everything reachable from it;
// what is new is the commit, the pruned trees and the proof, less what the
// ref's previous slice commit (the remote's value, the new commit's
// parent) already holds at the same path. go-git's push instead walks
// every object reachable from every remote ref (all of main's tree, on
// every publish). It returns errNeedsWalk, having pushed nothing, when a
// slice names a main commit the remote does not advertise or does not
// follow the remote's value of its ref.
//
// With expected (the remote's slice refs the local ones were cut
// against), a remote whose slice refs differ from it is errSlicesMoved,
// the remote's slice refs the clone lacks are deleted, each command
// carries its expected old value (the server refuses it when the ref has
// moved since) and the push is atomic where the server can.
func pushSlicesExact(ctx context.Context, st storage.Storer, ep *endpoint, expected map[plumbing.ReferenceName]plumbing.Hash) error {
	tep, err := transport.NewEndpoint(ep.url)
	if err != nil {
		return err
	}
	tep.CaBundle = ep.caBundle
	cl, err := client.NewClient(tep)
	if err != nil {
		return err
	}
	sess, err := cl.NewReceivePackSession(tep, ep.auth)
	if err != nil {
		return err
	}
	defer sess.Close()
	adv, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return err
	}
	remote, err := adv.AllReferences()
	if err != nil {
		return err
	}
	tips := map[plumbing.Hash]bool{}
	for _, r := range remote {
		if r.Type() == plumbing.HashReference {
			tips[r.Hash()] = true
		}
	}
	local, err := hashRefs(st, SliceRefPrefix)
	if err != nil {
		return err
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(adv.Capabilities)
	if expected != nil {
		now := map[string]plumbing.Hash{}
		for name, r := range remote {
			if r.Type() == plumbing.HashReference {
				now[name.String()] = r.Hash()
			}
		}
		if !sameSliceRefs(now, expected) {
			return errSlicesMoved
		}
		atomicIfSupported(adv.Capabilities, req.Capabilities)
	}
	w := newObjectsWalk(st)
	for _, r := range local {
		var old plumbing.Hash
		if rr, ok := remote[r.Name()]; ok {
			old = rr.Hash()
		}
		if old == r.Hash() {
			continue
		}
		if err := w.addSlice(r.Hash(), old, tips); err != nil {
			return fmt.Errorf("%s: %w", r.Name(), err)
		}
		req.Commands = append(req.Commands, &packp.Command{Name: r.Name(), Old: old, New: r.Hash()})
	}
	if expected != nil {
		_, gone, err := sliceChanges(st, expected)
		if err != nil {
			return err
		}
		for _, name := range gone {
			req.Commands = append(req.Commands, &packp.Command{Name: name, Old: expected[name], New: plumbing.ZeroHash})
		}
	}
	if len(req.Commands) == 0 {
		return nil
	}
	return sendPack(ctx, sess, st, req, w.objects)
}

// objectsWalk collects the objects of slice commits that their main
// commit and parent do not already hold at the same path.
type objectsWalk struct {
	st      storer.EncodedObjectStorer
	seen    map[plumbing.Hash]bool
	objects []plumbing.Hash
}

func newObjectsWalk(st storer.EncodedObjectStorer) *objectsWalk {
	return &objectsWalk{st: st, seen: map[plumbing.Hash]bool{}}
}

func (w *objectsWalk) add(h plumbing.Hash) bool {
	if w.seen[h] {
		return false
	}
	w.seen[h] = true
	w.objects = append(w.objects, h)
	return true
}

// addSlice adds slice commit h, which is to replace old on the remote,
// whose ref tips are tips.
func (w *objectsWalk) addSlice(h, old plumbing.Hash, tips map[plumbing.Hash]bool) error {
	c, err := object.GetCommit(w.st, h)
	if err != nil {
		return err
	}
	src, ok := sliceSource(c.Message)
	if !ok || !tips[src] {
		return errNeedsWalk
	}
	var parent *object.Tree
	switch {
	case len(c.ParentHashes) == 0:
	case len(c.ParentHashes) == 1 && c.ParentHashes[0] == old:
		pc, err := object.GetCommit(w.st, old)
		if err != nil {
			return err
		}
		if parent, err = pc.Tree(); err != nil {
			return err
		}
	default:
		return errNeedsWalk
	}
	main, err := object.GetCommit(w.st, src)
	if err != nil {
		return err
	}
	mainTree, err := main.Tree()
	if err != nil {
		return err
	}
	tree, err := c.Tree()
	if err != nil {
		return err
	}
	w.add(c.Hash)
	return w.addTree(tree, mainTree, parent)
}

// addTree adds t and what it holds that main and parent (t's counterparts
// at the same path, nil when they have none) do not.
func (w *objectsWalk) addTree(t, main, parent *object.Tree) error {
	if sameHash(main, t.Hash) || sameHash(parent, t.Hash) || !w.add(t.Hash) {
		return nil
	}
	for _, e := range t.Entries {
		m, p := entryOf(main, e.Name), entryOf(parent, e.Name)
		if (m != nil && m.Hash == e.Hash) || (p != nil && p.Hash == e.Hash) {
			continue
		}
		switch e.Mode {
		case filemode.Submodule:
		case filemode.Dir:
			sub, err := object.GetTree(w.st, e.Hash)
			if err != nil {
				return err
			}
			ms, err := w.subtree(m)
			if err != nil {
				return err
			}
			ps, err := w.subtree(p)
			if err != nil {
				return err
			}
			if err := w.addTree(sub, ms, ps); err != nil {
				return err
			}
		default:
			w.add(e.Hash)
		}
	}
	return nil
}

func (w *objectsWalk) subtree(e *object.TreeEntry) (*object.Tree, error) {
	if e == nil || e.Mode != filemode.Dir {
		return nil, nil
	}
	return object.GetTree(w.st, e.Hash)
}

func sameHash(t *object.Tree, h plumbing.Hash) bool { return t != nil && t.Hash == h }

func entryOf(t *object.Tree, name string) *object.TreeEntry {
	if t == nil {
		return nil
	}
	e, err := t.FindEntry(name)
	if err != nil {
		return nil
	}
	return e
}

// sendPack sends req with a pack of objects and checks the remote's
// report.
func sendPack(ctx context.Context, sess transport.ReceivePackSession, st storer.EncodedObjectStorer, req *packp.ReferenceUpdateRequest, objects []plumbing.Hash) error {
	if len(objects) == 0 {
		// Deletions alone: the protocol sends no pack then.
		rs, err := sess.ReceivePack(ctx, req)
		if err != nil {
			return err
		}
		if rs != nil {
			return rs.Error()
		}
		return nil
	}
	rd, wr := io.Pipe()
	req.Packfile = rd
	done := make(chan error, 1)
	go func() {
		// The window go-git and git push use: proofs delta well against
		// each other.
		if _, err := packfile.NewEncoder(wr, st, false).Encode(objects, 10); err != nil {
			done <- wr.CloseWithError(err)
			return
		}
		done <- wr.Close()
	}()
	rs, err := sess.ReceivePack(ctx, req)
	if err != nil {
		_ = rd.Close() // unblocks the encoder
		<-done
		return err
	}
	if err := <-done; err != nil {
		return err
	}
	if rs != nil {
		return rs.Error()
	}
	return nil
}
