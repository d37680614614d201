package fleetrender

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/fleet"
	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/hub/gitsource"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
)

// PipelineOptions say what a hub command compiles and where the inputs that
// are not the fleet repo's own files come from.
type PipelineOptions struct {
	// Clusters, ValidateOnly and Progress are Options'.
	Clusters     []string
	ValidateOnly bool
	Progress     func(done, total int)
	// Charts vendors chart-repo charts; nil means chartvendor.VendorCharts
	// (offline when charts/ is vendored and locked).
	Charts ChartVendor
	// Sources say how Git sources are vendored (gitsource.Vendor): the
	// zero value pins as the locks say and fetches only what is missing.
	Sources gitsource.Options
	// StatusRepo is where BestFit placement reads the clusters' reported
	// capacity: a URL or a directory holding the status refs. Empty reads
	// none (placement then uses Cluster.spec.capacity hints);
	// DefaultStatusRepo is the commands' default.
	StatusRepo string
	// StatusAuthDir holds the Git credentials for StatusRepo
	// (gitrepo.LoadAuth); empty means none.
	StatusAuthDir string
	// Committed reads a cluster's committed slice, which says where
	// GlobalJobs are already placed; nil reads rendered/ under the repo
	// root. Commands that compile a copy of the repo point it at the
	// rendered/ the copy was made from.
	Committed SliceReader
	// Warn receives the status documents that could not be used; nil
	// drops them.
	Warn func(msg string)
	// Rollout is where held units, snapshots and rollout states are read
	// (nil: rendered/ under the repo root), the states that replace the
	// committed ones, and whether every wave is released at once.
	Rollout *RolloutOptions
}

// SliceReader reads one cluster's committed slice; an error means it has
// none that can be read.
type SliceReader func(cluster string) (*slice.Slice, error)

// RenderedAt reads slices from rendered/ under root.
func RenderedAt(root string) SliceReader {
	return func(cluster string) (*slice.Slice, error) { return slice.Read(root, cluster) }
}

// statusReadTimeout bounds each Git operation of reading status refs.
const statusReadTimeout = time.Minute

// DefaultStatusRepo is where commands read status by default: the fleet
// repo's own status refs (refs/heads/flotilla/status/* or
// refs/remotes/origin/flotilla/status/*) when dir is a Git repository,
// else nowhere.
func DefaultStatusRepo(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		return ""
	}
	return dir
}

// Pipeline is how every hub command compiles a fleet repo: it gathers what
// the compile needs besides the repo's files — where GlobalJobs are already
// placed, the capacity the clusters reported, the chart vendor — and
// compiles, so render, validate and plan agree on the output of the same
// tree.
func Pipeline(ctx context.Context, repo *fleet.Repo, opts PipelineOptions) (*Output, error) {
	co := Options{
		Clusters:     opts.Clusters,
		Charts:       opts.Charts,
		ValidateOnly: opts.ValidateOnly,
		Progress:     opts.Progress,
		Rollout:      opts.Rollout,
	}
	if co.Rollout == nil {
		co.Rollout = &RolloutOptions{}
	}
	if co.Rollout.Committed == nil {
		ro := *co.Rollout
		ro.Committed = CommittedAt(repo.Root)
		co.Rollout = &ro
	}
	if co.Charts == nil {
		co.Charts = chartvendor.VendorCharts
	}
	co.Sources = func(ctx context.Context, root string, specs []gitsource.Spec) ([]gitsource.Result, error) {
		return gitsource.Vendor(ctx, root, specs, opts.Sources)
	}
	if hasBestFit(repo) {
		read := opts.Committed
		if read == nil {
			read = RenderedAt(repo.Root)
		}
		co.Placed = ReadPlaced(repo, read)
		// Validation places nothing it cannot place without status.
		if !opts.ValidateOnly && opts.StatusRepo != "" {
			caps, warnings, err := readCapacity(ctx, repo, opts.StatusRepo, opts.StatusAuthDir)
			if err != nil {
				return nil, err
			}
			if opts.Warn != nil {
				for _, w := range warnings {
					opts.Warn(w)
				}
			}
			co.Capacity = caps
		}
	}
	return Compile(ctx, repo, co)
}

func hasBestFit(repo *fleet.Repo) bool {
	for _, j := range repo.GlobalJobs {
		if j.Spec.Placement.Type == fleet.GlobalJobPlacementBestFit {
			return true
		}
	}
	return false
}

// ReadPlaced finds, for each BestFit GlobalJob, the destination clusters
// whose committed slice already runs it.
func ReadPlaced(repo *fleet.Repo, read SliceReader) PlacedJobs {
	placed := PlacedJobs{}
	units := map[string]map[string]bool{}
	for _, j := range repo.GlobalJobs {
		if j.Spec.Placement.Type != fleet.GlobalJobPlacementBestFit {
			continue
		}
		unit := slice.VolcanoJobPrefix + j.Metadata.Name
		for _, cl := range repo.Resolve(j.Spec.Placement.Destination) {
			name := cl.Metadata.Name
			u, ok := units[name]
			if !ok {
				u = map[string]bool{}
				if s, err := read(name); err == nil {
					for _, su := range s.Units {
						u[su.Name] = true
					}
				}
				units[name] = u
			}
			if u[unit] {
				placed[j.Metadata.Name] = append(placed[j.Metadata.Name], name)
			}
		}
	}
	return placed
}

// readCapacity reads the clusters' last reported capacity from the status
// refs at statusRepo. Warnings name documents that could not be used.
func readCapacity(ctx context.Context, repo *fleet.Repo, statusRepo, authDir string) (CapacitySource, []string, error) {
	ro := fleetview.ReadOptions{Repo: statusRepo, Timeout: statusReadTimeout}
	if authDir != "" {
		auth, err := gitrepo.LoadAuth(authDir)
		if err != nil {
			return nil, nil, err
		}
		ro.Auth = auth
	}
	docs, err := fleetview.DocumentsFor(ctx, ro, repo)
	if err != nil {
		return nil, nil, fmt.Errorf("read cluster status for BestFit placement: %w", err)
	}
	warnings := append([]string(nil), docs.Warnings...)
	for _, cd := range docs.Clusters {
		if cd.Trust != nil && !cd.Trust.Trusted {
			warnings = append(warnings, fmt.Sprintf("status of cluster %s is not trusted (%s); its capacity is not used", cd.Cluster, cd.Trust.Reason))
		}
	}
	caps, w := fleetview.CapacitiesFrom(docs)
	return caps, append(warnings, w...), nil
}
