package plan

import (
	"context"
	"fmt"
	"strings"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// statusDoc is a cluster's newest status document found in the repository.
type statusDoc struct {
	ref string
	rf  gitrepo.RefFiles
}

// clusterCapabilities picks every cluster's Helm capabilities: from its
// latest status document (the live API server the agent renders against)
// when there is a trustworthy one, else from clusters/<name>.yaml (head's,
// else base's), else Flotilla's default (render.DefaultKubeVersion, Helm's API versions). Both sides of a cluster render with
// the same capabilities, so equal unit hashes mean equal objects.
//
// Status documents are read from the local repository: its own
// refs/heads/flotilla/status/<cluster> and the remote-tracking
// refs/remotes/origin/flotilla/status/<cluster> (what a CI checkout with
// full history has); the newer commit wins. A document is ignored, with a
// warning, when its commit changed anything but status.yaml, names another
// cluster, or is not signed by one of the cluster's statusKeys when the
// Cluster lists some.
func clusterCapabilities(ctx context.Context, gitDir string, base, head *fleet.Repo) (map[string]Capabilities, []string, error) {
	docs := map[string]*statusDoc{}
	var warnings []string
	for _, prefix := range []string{status.RefPrefix, remoteStatusPrefix} {
		refs, err := gitrepo.ReadRefs(ctx, gitDir, prefix, gitrepo.ReadOptions{File: status.FileName})
		if err != nil {
			return nil, nil, fmt.Errorf("plan: read status refs: %w", err)
		}
		for _, rf := range refs {
			cluster, ok := statusRefCluster(rf.Ref)
			if !ok || !rf.FileFound {
				continue
			}
			if prev := docs[cluster]; prev != nil && !rf.Committer.When.After(prev.rf.Committer.When) {
				continue
			}
			docs[cluster] = &statusDoc{ref: rf.Ref, rf: rf}
		}
	}
	out := map[string]Capabilities{}
	clusterOf := func(name string) *fleet.Cluster {
		if c := head.Cluster(name); c != nil {
			return c
		}
		return base.Cluster(name)
	}
	names := map[string]bool{}
	for _, r := range []*fleet.Repo{base, head} {
		for _, c := range r.Clusters {
			names[c.Metadata.Name] = true
		}
	}
	for _, name := range sortedKeys(names) {
		cl := clusterOf(name)
		if d := docs[name]; d != nil {
			doc, why := trustedStatus(name, d, cl)
			if why != "" {
				warnings = append(warnings, fmt.Sprintf("cluster %s: status document at %s ignored for Helm capabilities: %s.", name, d.ref, why))
			} else if doc.KubernetesVersion != "" {
				out[name] = Capabilities{KubeVersion: doc.KubernetesVersion, APIVersions: len(doc.APIVersions), Source: FromStatus, list: doc.APIVersions}
				continue
			}
		}
		if v, apis := cl.Spec.KubernetesVersion, cl.Spec.APIVersions; v != "" || len(apis) > 0 {
			if v == "" {
				v = render.DefaultKubeVersion
			}
			out[name] = Capabilities{KubeVersion: v, APIVersions: len(apis), Source: FromCluster, list: apis}
			continue
		}
		out[name] = Capabilities{KubeVersion: render.DefaultKubeVersion, Source: FromDefault}
	}
	return out, warnings, nil
}

// remoteStatusPrefix is where a clone keeps the remote's status refs.
const remoteStatusPrefix = "refs/remotes/origin/flotilla/status/"

// statusRefCluster extracts the cluster of a status ref, local or remote.
func statusRefCluster(ref string) (string, bool) {
	for _, prefix := range []string{status.RefPrefix, remoteStatusPrefix} {
		if c, ok := strings.CutPrefix(ref, prefix); ok {
			return c, c != "" && !strings.Contains(c, "/")
		}
	}
	return "", false
}

// trustedStatus decodes and checks a status document; why says why it is
// not believed.
func trustedStatus(cluster string, d *statusDoc, cl *fleet.Cluster) (*status.ClusterStatus, string) {
	for _, p := range d.rf.Changed {
		if p != status.FileName {
			return nil, fmt.Sprintf("its commit also changed %s", p)
		}
	}
	doc, err := status.Decode(d.rf.File)
	if err != nil {
		return nil, fmt.Sprintf("undecodable (%v)", err)
	}
	if doc.Cluster != cluster {
		return nil, fmt.Sprintf("it is cluster %s's", doc.Cluster)
	}
	if len(cl.Spec.StatusKeys) > 0 {
		keys := map[string][]byte{}
		for i, k := range cl.Spec.StatusKeys {
			keys[fmt.Sprintf("statusKeys[%d]", i)] = []byte(k)
		}
		ring, err := signature.ParseKeyRing(keys)
		if err != nil {
			return nil, fmt.Sprintf("the cluster's statusKeys do not parse (%v)", err)
		}
		if _, err := d.rf.Commit.Verify(ring); err != nil {
			return nil, fmt.Sprintf("its commit is not signed by a status key (%v)", err)
		}
	}
	return doc, ""
}
