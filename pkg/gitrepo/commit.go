package gitrepo

import (
	"io"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
)

// Signature is a commit author or committer.
type Signature struct {
	Name  string
	Email string
	When  time.Time
}

// Commit is what the product needs to know about a commit.
type Commit struct {
	Hash      string
	Author    Signature
	Committer Signature
	Message   string
	Parents   []string
	// RawSignature is the commit's signature header (an armored OpenPGP
	// signature or an SSH signature, "-----BEGIN SSH SIGNATURE-----"),
	// empty when the commit is unsigned. Check it with Verify.
	RawSignature string

	payload []byte // the commit encoded without its signature: what was signed
}

// Verify checks the commit's signature against keys; see signature.KeyRing.Verify.
func (c Commit) Verify(keys *signature.KeyRing) (signature.Verification, error) {
	if c.RawSignature == "" {
		return signature.Verification{}, signature.ErrUnsigned
	}
	return keys.Verify(c.payload, c.RawSignature)
}

func newCommit(c *object.Commit) (Commit, error) {
	out := Commit{
		Hash:         c.Hash.String(),
		Author:       Signature{Name: c.Author.Name, Email: c.Author.Email, When: c.Author.When},
		Committer:    Signature{Name: c.Committer.Name, Email: c.Committer.Email, When: c.Committer.When},
		Message:      c.Message,
		RawSignature: c.PGPSignature,
	}
	for _, p := range c.ParentHashes {
		out.Parents = append(out.Parents, p.String())
	}
	if c.PGPSignature != "" {
		obj := &plumbing.MemoryObject{}
		if err := c.EncodeWithoutSignature(obj); err != nil {
			return Commit{}, err
		}
		rd, err := obj.Reader()
		if err != nil {
			return Commit{}, err
		}
		defer rd.Close()
		if out.payload, err = io.ReadAll(rd); err != nil {
			return Commit{}, err
		}
	}
	return out, nil
}

// ReadCommit reads the commit rev resolves to in the local repository at
// repoDir.
func ReadCommit(repoDir, rev string) (Commit, error) {
	r, err := openLocal(repoDir)
	if err != nil {
		return Commit{}, err
	}
	c, err := resolveCommit(r, rev)
	if err != nil {
		return Commit{}, err
	}
	return newCommit(c)
}
