package fleetview

import (
	"context"
	"fmt"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/rollout"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/pkg/redact"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// ClusterDocument is one cluster's status document as the hub reads it.
type ClusterDocument struct {
	Cluster string
	// Document is nil when the cluster has no status ref or its head
	// commit is not trusted (Trust.Reason says why).
	Document     *status.ClusterStatus
	Trust        *Trust
	StatusRef    string
	StatusCommit string
}

// Documents are the fleet's status documents, one per cluster.
type Documents struct {
	// Repo, Branch and Revision are set by ReadDocuments (the branch head
	// the clusters were read from).
	Repo     string
	Branch   string
	Revision string
	// Clusters are sorted by name.
	Clusters []ClusterDocument
	Warnings []string
}

// ReadDocuments reads the clusters of clusters/ at the branch head (only
// o.Clusters when set) and each one's status document from its status ref,
// judged as Read judges them. It is the raw material of views beside the
// fleet view (e.g. `flotilla status jobs`).
func ReadDocuments(ctx context.Context, o ReadOptions) (*Documents, error) {
	d, err := load(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer d.main.close()
	return documentsOf(d, &o), nil
}

func documentsOf(d *fleetData, o *ReadOptions) *Documents {
	out := &Documents{Repo: redact.URL(o.Repo), Branch: o.branch(), Revision: d.main.revision, Warnings: d.warnings}
	for _, s := range d.strays {
		out.Warnings = append(out.Warnings, fmt.Sprintf("status ref %s in %s: %s", s.Ref, s.Repo, s.Reason))
	}
	for _, c := range d.clusters {
		out.Clusters = append(out.Clusters, clusterDocument(c.Metadata.Name, d.refs[c.Metadata.Name]))
	}
	return out
}

// DocumentsFor reads the status refs of o.StatusRepos (else o.Repo) and
// judges them against the clusters of repo — a fleet repo loaded from a
// working tree, as `flotilla render` has it — rather than a branch head.
// Clusters follow repo.Clusters.
func DocumentsFor(ctx context.Context, o ReadOptions, repo *fleet.Repo) (*Documents, error) {
	refs, err := readStatusRefs(ctx, &o)
	if err != nil {
		return nil, err
	}
	out := &Documents{}
	byCluster := map[string]*statusRef{}
	keyRings := map[string]*signature.KeyRing{}
	for i := range refs {
		sr := &refs[i]
		c := repo.Cluster(sr.cluster)
		judge(sr, c, keyRings)
		if c == nil {
			continue
		}
		if prev, ok := byCluster[sr.cluster]; ok {
			out.Warnings = append(out.Warnings, fmt.Sprintf("cluster %s has status refs in %s and %s", sr.cluster, prev.repo, sr.repo))
			if !fresher(sr, prev) {
				continue
			}
		}
		byCluster[sr.cluster] = sr
	}
	for _, c := range repo.Clusters {
		out.Clusters = append(out.Clusters, clusterDocument(c.Metadata.Name, byCluster[c.Metadata.Name]))
	}
	return out, nil
}

func clusterDocument(name string, sr *statusRef) ClusterDocument {
	cd := ClusterDocument{Cluster: name}
	if sr == nil {
		return cd
	}
	trust := sr.trust
	cd.Trust = &trust
	cd.Document = sr.doc
	cd.StatusRef, cd.StatusCommit = sr.ref.Ref, sr.ref.Hash
	return cd
}

// ObserveUnit is how a rollout sees unit on cluster against the unit hash
// want: from the cluster's status document in docs when it is trusted,
// else Pending, saying why (rollout.Observe).
func ObserveUnit(docs map[string]ClusterDocument, cluster, unit, want string) rollout.ClusterProgress {
	cd := docs[cluster]
	note := ""
	if cd.Trust != nil && !cd.Trust.Trusted {
		note = "status not trusted: " + cd.Trust.Reason
	}
	return rollout.Observe(cluster, unit, want, cd.Document, note)
}
