package fleetview

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// remoteStatusPrefix is where a clone made by the git CLI keeps the
// remote's status branches.
const remoteStatusPrefix = "refs/remotes/origin/flotilla/status/"

// statusRef is one cluster's status ref as read, judged.
type statusRef struct {
	cluster string
	repo    string // where it was read (redacted URL or directory)
	ref     gitrepo.RefFiles
	doc     *status.ClusterStatus // nil when untrusted or unreadable
	trust   Trust
}

// Trust is the hub's verdict on a status ref's head commit.
type Trust struct {
	Trusted bool `json:"trusted"`
	// Reason says why a status is not trusted.
	Reason string `json:"reason,omitempty"`
	// Signer identifies the key that signed the commit, when the cluster
	// has statusKeys.
	Signer string `json:"signer,omitempty"`
}

// readStatusRefs reads every status ref of every status repo.
func readStatusRefs(ctx context.Context, o *ReadOptions) ([]statusRef, error) {
	repos := o.StatusRepos
	if len(repos) == 0 {
		repos = []string{o.Repo}
	}
	var out []statusRef
	for _, repo := range repos {
		refs, prefix, err := readRefsOf(ctx, o, repo)
		if err != nil {
			return nil, fmt.Errorf("status refs of %s: %w", redact.URL(repo), err)
		}
		for _, rf := range refs {
			out = append(out, statusRef{cluster: strings.TrimPrefix(rf.Ref, prefix), repo: redact.URL(repo), ref: rf})
		}
	}
	return out, nil
}

func readRefsOf(ctx context.Context, o *ReadOptions, repo string) ([]gitrepo.RefFiles, string, error) {
	ro := gitrepo.ReadOptions{Auth: o.Auth, Timeout: o.Timeout, File: status.FileName, MaxFileSize: status.MaxDocumentSize}
	if isLocalDir(repo) {
		refs, err := gitrepo.ReadRefs(ctx, repo, status.RefPrefix, ro)
		if err != nil || len(refs) > 0 {
			return refs, status.RefPrefix, err
		}
		refs, err = gitrepo.ReadRefs(ctx, repo, remoteStatusPrefix, ro)
		return refs, remoteStatusPrefix, err
	}
	dir, err := o.cacheDirFor("status", repo)
	if err != nil {
		return nil, "", err
	}
	ro.CacheDir = dir
	refs, err := gitrepo.ReadRefs(ctx, repo, status.RefPrefix, ro)
	return refs, status.RefPrefix, err
}

// judge decides whether a status ref may be believed: its head commit
// changes status.yaml only, the document is valid and names the ref's
// cluster, the cluster exists, and, when the cluster declares statusKeys,
// the commit is signed by one of them. keyRings holds the parsed statusKeys
// (statusKeyRings); it is only read, so refs can be judged in parallel.
func judge(sr *statusRef, c *fleet.Cluster, keyRings map[string]*signature.KeyRing) {
	untrusted := func(format string, args ...any) {
		sr.doc = nil
		sr.trust = Trust{Reason: fmt.Sprintf(format, args...)}
	}
	short := shortHash(sr.ref.Hash)
	if c == nil {
		untrusted("no cluster %q in clusters/", sr.cluster)
		return
	}
	for _, p := range sr.ref.Changed {
		if p != status.FileName {
			untrusted("commit %s changes %s; a status commit may change %s only", short, strings.Join(sr.ref.Changed, ", "), status.FileName)
			return
		}
	}
	if !sr.ref.FileFound {
		untrusted("commit %s has no %s", short, status.FileName)
		return
	}
	var signer string
	if len(c.Spec.StatusKeys) > 0 {
		kr := keyRings[c.Metadata.Name]
		if kr == nil {
			untrusted("spec.statusKeys of cluster %s cannot be parsed, so commit %s cannot be verified", c.Metadata.Name, short)
			return
		}
		v, err := sr.ref.Verify(kr)
		switch {
		case errors.Is(err, signature.ErrUnsigned):
			untrusted("commit %s is not signed; cluster %s requires a signature by one of its statusKeys", short, c.Metadata.Name)
			return
		case errors.Is(err, signature.ErrUntrustedSigner):
			untrusted("commit %s is signed by a key that is not among cluster %s's statusKeys", short, c.Metadata.Name)
			return
		case err != nil:
			untrusted("commit %s: %v", short, err)
			return
		}
		signer = v.Identity
		if signer == "" {
			signer = v.Fingerprint
		}
		signer = v.Format + " " + signer
	}
	doc, err := status.Decode(sr.ref.File)
	if err != nil {
		untrusted("commit %s: %v", short, err)
		return
	}
	if doc.Cluster != sr.cluster {
		untrusted("commit %s: the document claims to be cluster %q's status", short, doc.Cluster)
		return
	}
	sr.doc = doc
	sr.trust = Trust{Trusted: true, Signer: signer}
}

// statusKeyRings parses the statusKeys of every cluster that has some; a
// cluster whose keys do not parse maps to nil (its status is then
// untrusted, never trusted by default).
func statusKeyRings(clusters []*fleet.Cluster) map[string]*signature.KeyRing {
	out := map[string]*signature.KeyRing{}
	for _, c := range clusters {
		if len(c.Spec.StatusKeys) == 0 {
			continue
		}
		contents := map[string][]byte{}
		for i, k := range c.Spec.StatusKeys {
			contents[fmt.Sprintf("clusters/%s.yaml spec.statusKeys[%d]", c.Metadata.Name, i)] = []byte(k)
		}
		kr, err := signature.ParseKeyRing(contents)
		if err != nil {
			kr = nil
		}
		out[c.Metadata.Name] = kr
	}
	return out
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
