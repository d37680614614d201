package cmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/fleet"
	"github.com/flotilla-gitops/flotilla/pkg/fleetstatus"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// statusReadTimeout bounds each Git operation of reading status refs.
const statusReadTimeout = time.Minute

// renderCapacity reads the clusters' last reported capacity for GlobalJob
// BestFit placement, only when the repo has such a job: from --status-repo
// (a URL or directory), else from the fleet repo's own status refs
// (refs/heads/flotilla/status/* or refs/remotes/origin/flotilla/status/*)
// when --repo is a Git repository. Nil without a source: placement then
// uses Cluster.spec.capacity hints (jobs already placed stay where they
// are either way). Warnings name documents that could not be used.
func renderCapacity(ctx context.Context, root string, repo *fleet.Repo, statusRepo, authDir string) (slice.CapacitySource, []string, error) {
	bestFit := false
	for _, j := range repo.GlobalJobs {
		bestFit = bestFit || j.Spec.Placement.Type == fleet.GlobalJobPlacementBestFit
	}
	if !bestFit {
		return nil, nil, nil
	}
	src := statusRepo
	if src == "" {
		if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
			return nil, nil, nil
		}
		src = root
	}
	ro := fleetstatus.ReadOptions{Repo: src, Timeout: statusReadTimeout}
	if authDir != "" {
		auth, err := gitrepo.LoadAuth(authDir)
		if err != nil {
			return nil, nil, err
		}
		ro.Auth = auth
	}
	docs, err := fleetstatus.DocumentsFor(ctx, ro, repo)
	if err != nil {
		return nil, nil, fmt.Errorf("read cluster status for BestFit placement: %w", err)
	}
	warnings := append([]string(nil), docs.Warnings...)
	for _, cd := range docs.Clusters {
		if cd.Trust != nil && !cd.Trust.Trusted {
			warnings = append(warnings, fmt.Sprintf("status of cluster %s is not trusted (%s); its capacity is not used", cd.Cluster, cd.Trust.Reason))
		}
	}
	caps, w := fleetstatus.CapacitiesFrom(docs)
	return caps, append(warnings, w...), nil
}
