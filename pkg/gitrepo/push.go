package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
)

// PushOptions configure a Writer.
type PushOptions struct {
	Auth    Auth
	Timeout time.Duration // per network operation; DefaultTimeout when zero
	// MaxAttempts bounds the pushes tried when the ref moves under us
	// (another writer won the race); 10 when zero.
	MaxAttempts int
	// Backoff spaces those attempts; the zero value starts at 100ms.
	Backoff Backoff
	// MaxHistory, when > 0, bounds the ref's history: a commit that would
	// make the ref hold more than MaxHistory commits is pushed instead as a
	// single root commit with the same tree, with force, on that ref only.
	MaxHistory int
	// Signer signs every commit when set (see signature.ParseSigningKey).
	Signer signature.Signer
	// Guard, when set, sees the ref's current head before each commit is
	// made on it (not when the ref does not exist): read returns a file of
	// the head's tree. An error stops the push and is returned wrapped; the
	// head is fetched again before the next call, so a later push judges the
	// newest head.
	Guard func(ref string, read func(path string) (data []byte, found bool, err error)) error
}

// PushResult describes a PushFiles call.
type PushResult struct {
	Hash      string // the commit at the ref afterwards
	Attempts  int    // pushes sent (0 when Unchanged)
	Squashed  bool   // the history was compacted into one root commit
	Unchanged bool   // the ref already had exactly these contents; nothing pushed
}

// Writer commits files to refs of one remote. It remembers each ref's head
// between calls, so a steady writer pushes without fetching first (a push
// is then one GET and one POST over HTTP). Safe for concurrent use; calls
// for the same ref are serialised.
type Writer struct {
	url  string
	opts PushOptions

	mu   sync.Mutex
	refs map[string]*refState
}

type refState struct {
	mu    sync.Mutex
	known bool
	st    *memory.Storage // the head commit and its tree, nothing else
	head  plumbing.Hash   // zero when the ref does not exist
	count int             // commits in the ref's history, capped at MaxHistory+1
}

// NewWriter returns a Writer for the remote url.
func NewWriter(url string, opts PushOptions) *Writer {
	return &Writer{url: url, opts: opts, refs: map[string]*refState{}}
}

// PushFiles is NewWriter(remote, opts).PushFiles(...), for one-off use.
func PushFiles(ctx context.Context, remote, ref string, files map[string][]byte, msg string, author Signature, opts PushOptions) (PushResult, error) {
	return NewWriter(remote, opts).PushFiles(ctx, ref, files, msg, author)
}

// PushFiles commits files on top of ref's current remote head (or as a new
// root commit when ref does not exist) and pushes that one ref with an
// explicit refspec; no other ref is ever updated. Files map slash-separated
// paths to contents; a nil content deletes the path; paths not mentioned
// keep the head's content. When the result equals the head's tree nothing
// is pushed (Unchanged). If the ref moved meanwhile (non-fast-forward, or
// the server's compare-and-swap failed) it fetches the new head, commits
// again on top of it and retries with backoff, up to MaxAttempts
// (ErrConflict after that). A refusal that is not such a race is
// ErrRejected, with the server's message. Author.When defaults to now; the
// committer is the author.
func (w *Writer) PushFiles(ctx context.Context, ref string, files map[string][]byte, msg string, author Signature) (PushResult, error) {
	name := plumbing.ReferenceName(ref)
	if !strings.HasPrefix(ref, "refs/") || name.Validate() != nil {
		return PushResult{}, fmt.Errorf("push: invalid ref %q", ref)
	}
	for p := range files {
		if _, err := cleanRepoPath(p); err != nil {
			return PushResult{}, err
		}
	}
	ep, err := w.opts.Auth.endpoint(w.url, timeoutOr(w.opts.Timeout))
	if err != nil {
		return PushResult{}, err
	}
	rs := w.state(ref)
	rs.mu.Lock()
	defer rs.mu.Unlock()

	attempts := w.opts.MaxAttempts
	if attempts <= 0 {
		attempts = 10
	}
	var lastErr error
	for attempt := 0; attempt < attempts; attempt++ {
		if attempt > 0 {
			if err := w.opts.Backoff.Wait(ctx, attempt-1); err != nil {
				return PushResult{}, err
			}
		}
		if !rs.known {
			if err := w.refresh(ctx, ep, name, rs); err != nil {
				return PushResult{}, err
			}
		}
		var baseTree plumbing.Hash
		if !rs.head.IsZero() {
			c, err := object.GetCommit(rs.st, rs.head)
			if err != nil {
				return PushResult{}, fmt.Errorf("push %s: %w", ref, err)
			}
			baseTree = c.TreeHash
			if w.opts.Guard != nil {
				if err := w.opts.Guard(ref, headReader(rs.st, c)); err != nil {
					rs.known = false
					return PushResult{}, fmt.Errorf("push %s: %w", ref, err)
				}
			}
		}
		tree, err := overlayTree(rs.st, baseTree, files)
		if err != nil {
			return PushResult{}, fmt.Errorf("push %s: %w", ref, err)
		}
		if !rs.head.IsZero() && tree == baseTree {
			return PushResult{Hash: rs.head.String(), Attempts: attempt, Unchanged: true}, nil
		}
		squash := w.opts.MaxHistory > 0 && !rs.head.IsZero() && rs.count+1 > w.opts.MaxHistory
		var parents []plumbing.Hash
		if !rs.head.IsZero() && !squash {
			parents = []plumbing.Hash{rs.head}
		}
		commit, err := makeCommit(rs.st, tree, parents, msg, author, w.opts.Signer)
		if err != nil {
			return PushResult{}, fmt.Errorf("push %s: %w", ref, err)
		}
		var progress bytes.Buffer
		err = pushCommit(ctx, rs.st, ep, w.opts.Timeout, name, commit, rs.head, squash, &progress)
		if err == nil {
			if squash {
				rs.count = 1
			} else {
				rs.count++
			}
			rs.head = commit
			rs.st, err = snapshot(rs.st, commit)
			if err != nil {
				rs.known = false
			}
			return PushResult{Hash: commit.String(), Attempts: attempt + 1, Squashed: squash}, nil
		}
		if isTransportError(err) {
			rs.known = false
			return PushResult{}, err
		}
		// Refused: a race with another writer, or a real refusal? The
		// remote's current head tells, no message parsing needed.
		refs, lerr := listRefs(ctx, ep, w.opts.Timeout)
		if lerr != nil {
			rs.known = false
			return PushResult{}, lerr
		}
		if now := refs[ref]; now == rs.head {
			return PushResult{}, fmt.Errorf("push %s to %s: %w: %w%s", ref, ep.redacted, ErrRejected, err, serverMessage(&progress))
		}
		rs.known = false
		lastErr = err
	}
	return PushResult{}, fmt.Errorf("push %s to %s: %w after %d attempts: %w", ref, ep.redacted, ErrConflict, attempts, lastErr)
}

// guardFileLimit bounds what a Guard may read: the head may be written by
// someone else.
const guardFileLimit = 1 << 20

// headReader reads files of c's tree from st, for a Guard.
func headReader(st storage.Storer, c *object.Commit) func(string) ([]byte, bool, error) {
	return func(p string) ([]byte, bool, error) {
		return fileAt(st, c, p, guardFileLimit)
	}
}

func (w *Writer) state(ref string) *refState {
	w.mu.Lock()
	defer w.mu.Unlock()
	rs := w.refs[ref]
	if rs == nil {
		rs = &refState{}
		w.refs[ref] = rs
	}
	return rs
}

// refresh fetches ref's head into a fresh store: depth 1, or MaxHistory+1
// to learn whether the history is over the bound.
func (w *Writer) refresh(ctx context.Context, ep *endpoint, ref plumbing.ReferenceName, rs *refState) error {
	st := memory.NewStorage()
	depth := 1
	if w.opts.MaxHistory > 0 {
		depth = w.opts.MaxHistory + 1
	}
	spec := config.RefSpec("+" + ref.String() + ":" + ref.String())
	err := fetchInto(ctx, st, ep, w.opts.Timeout, []config.RefSpec{spec}, depth)
	if errors.Is(err, ErrRefNotFound) {
		rs.st, rs.head, rs.count, rs.known = st, plumbing.ZeroHash, 0, true
		return nil
	}
	if err != nil {
		return err
	}
	r, err := st.Reference(ref)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", ref, err)
	}
	count := 0
	for h := r.Hash(); count <= depth; count++ {
		c, err := object.GetCommit(st, h)
		if err != nil {
			count = depth // beyond the shallow boundary: more than MaxHistory
			break
		}
		if len(c.ParentHashes) == 0 {
			count++
			break
		}
		h = c.ParentHashes[0]
	}
	rs.st, rs.head, rs.count, rs.known = st, r.Hash(), count, true
	return nil
}

func pushCommit(ctx context.Context, st storage.Storer, ep *endpoint, timeout time.Duration, ref plumbing.ReferenceName, commit, old plumbing.Hash, force bool, progress io.Writer) error {
	opCtx, cancel := context.WithTimeout(ctx, timeoutOr(timeout))
	defer cancel()
	rem := git.NewRemote(st, &config.RemoteConfig{Name: "origin", URLs: []string{ep.url}})
	spec := commit.String() + ":" + ref.String()
	opts := &git.PushOptions{
		RemoteName: "origin",
		Auth:       ep.auth,
		CABundle:   ep.caBundle,
		Progress:   progress,
	}
	if force {
		spec = "+" + spec
		// A lease: force only over the head we built on, so a squash never
		// discards another writer's commit.
		opts.RequireRemoteRefs = []config.RefSpec{config.RefSpec(old.String() + ":" + ref.String())}
	}
	opts.RefSpecs = []config.RefSpec{config.RefSpec(spec)}
	err := rem.PushContext(opCtx, opts)
	if err == nil || errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	return classify(ctx, "push", ep.redacted, err)
}

func serverMessage(b *bytes.Buffer) string {
	msg := strings.TrimSpace(b.String())
	if msg == "" {
		return ""
	}
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	return " (remote: " + strings.ReplaceAll(msg, "\n", "; ") + ")"
}

// makeCommit stores a commit, signed when signer is set.
func makeCommit(st storage.Storer, tree plumbing.Hash, parents []plumbing.Hash, msg string, author Signature, signer signature.Signer) (plumbing.Hash, error) {
	when := author.When
	if when.IsZero() {
		when = time.Now()
	}
	sig := object.Signature{Name: author.Name, Email: author.Email, When: when}
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: tree, ParentHashes: parents}
	if signer != nil {
		unsigned := &plumbing.MemoryObject{}
		if err := c.EncodeWithoutSignature(unsigned); err != nil {
			return plumbing.ZeroHash, err
		}
		rd, err := unsigned.Reader()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		signature, err := signer.Sign(rd)
		rd.Close()
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("sign commit: %w", err)
		}
		c.PGPSignature = string(signature)
	}
	obj := st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return st.SetEncodedObject(obj)
}

// snapshot copies commit and its whole tree into a fresh store marked
// shallow at commit, so a long-lived writer does not accumulate history.
func snapshot(src *memory.Storage, commit plumbing.Hash) (*memory.Storage, error) {
	dst := memory.NewStorage()
	c, err := object.GetCommit(src, commit)
	if err != nil {
		return nil, err
	}
	var copyObj func(h plumbing.Hash) error
	copyObj = func(h plumbing.Hash) error {
		obj, err := src.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return err
		}
		if _, err := dst.SetEncodedObject(obj); err != nil {
			return err
		}
		if obj.Type() != plumbing.TreeObject {
			return nil
		}
		t, err := object.DecodeTree(src, obj)
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			if e.Mode == filemode.Submodule {
				continue
			}
			if err := copyObj(e.Hash); err != nil {
				return err
			}
		}
		return nil
	}
	if err := copyObj(commit); err != nil {
		return nil, err
	}
	if err := copyObj(c.TreeHash); err != nil {
		return nil, err
	}
	if len(c.ParentHashes) > 0 {
		if err := dst.SetShallow([]plumbing.Hash{commit}); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// cleanRepoPath validates a slash-separated path inside a repository.
func cleanRepoPath(p string) (string, error) {
	c := path.Clean(p)
	if p == "" || strings.HasPrefix(p, "/") || c == "." || c == ".." || strings.HasPrefix(c, "../") || strings.Contains(p, "\x00") {
		return "", fmt.Errorf("%w: %q", ErrUnsafePath, p)
	}
	for _, part := range strings.Split(c, "/") {
		if strings.EqualFold(part, ".git") {
			return "", fmt.Errorf("%w: %q", ErrUnsafePath, p)
		}
	}
	return c, nil
}

// overlayTree stores base's tree with files applied (nil content deletes)
// and returns the new root tree hash.
func overlayTree(st storage.Storer, base plumbing.Hash, files map[string][]byte) (plumbing.Hash, error) {
	flat := map[string]object.TreeEntry{}
	if !base.IsZero() {
		t, err := object.GetTree(st, base)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if err := flatten(st, t, "", flat); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		c, _ := cleanRepoPath(p)
		// A file replaces a directory of the same name and vice versa.
		for k := range flat {
			if strings.HasPrefix(k, c+"/") || strings.HasPrefix(c, k+"/") {
				delete(flat, k)
			}
		}
		content := files[p]
		if content == nil {
			delete(flat, c)
			continue
		}
		h, err := storeBlob(st, content)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		flat[c] = object.TreeEntry{Name: path.Base(c), Mode: filemode.Regular, Hash: h}
	}
	return buildTree(st, flat)
}

func flatten(st storage.Storer, t *object.Tree, prefix string, out map[string]object.TreeEntry) error {
	for _, e := range t.Entries {
		p := prefix + e.Name
		if e.Mode == filemode.Dir {
			sub, err := object.GetTree(st, e.Hash)
			if err != nil {
				return err
			}
			if err := flatten(st, sub, p+"/", out); err != nil {
				return err
			}
			continue
		}
		out[p] = e
	}
	return nil
}

type treeNode struct {
	files map[string]object.TreeEntry
	dirs  map[string]*treeNode
}

// buildTree stores the nested trees for a flat path → entry map.
func buildTree(st storer.EncodedObjectStorer, flat map[string]object.TreeEntry) (plumbing.Hash, error) {
	root := &treeNode{files: map[string]object.TreeEntry{}, dirs: map[string]*treeNode{}}
	for p, e := range flat {
		n := root
		parts := strings.Split(p, "/")
		for _, d := range parts[:len(parts)-1] {
			next := n.dirs[d]
			if next == nil {
				next = &treeNode{files: map[string]object.TreeEntry{}, dirs: map[string]*treeNode{}}
				n.dirs[d] = next
			}
			n = next
		}
		e.Name = parts[len(parts)-1]
		n.files[e.Name] = e
	}
	return storeTree(st, root)
}

func storeTree(st storer.EncodedObjectStorer, n *treeNode) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	for _, e := range n.files {
		entries = append(entries, e)
	}
	for name, d := range n.dirs {
		h, err := storeTree(st, d)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	return storeEntries(st, entries)
}
