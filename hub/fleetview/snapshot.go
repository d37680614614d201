package fleetview

import "context"

// Snapshot is everything the hub shows of the fleet at one branch head,
// read in one pass over Git: the fleet view, the judged documents behind
// it (units, jobs) and the rollout of the head commit. It is what a page
// of the whole fleet (hub/dashboard) is made from.
type Snapshot struct {
	View      *View
	Documents *Documents
	// Rollout follows the branch head; nil with RolloutError set when it
	// cannot be followed (the rest of the snapshot stands).
	Rollout      *RolloutView
	RolloutError string
	// Labels are each cluster's labels from clusters/ (the fleet view
	// carries fleets, not labels).
	Labels map[string]map[string]string
}

// ReadSnapshot reads the fleet once and builds all three views from it.
func ReadSnapshot(ctx context.Context, o ReadOptions) (*Snapshot, error) {
	d, err := load(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer d.main.close()
	s := &Snapshot{View: viewOf(ctx, d, &o), Documents: documentsOf(d, &o), Labels: map[string]map[string]string{}}
	for _, c := range d.clusters {
		s.Labels[c.Metadata.Name] = c.Metadata.Labels
	}
	if s.Rollout, err = rolloutFrom(ctx, d, &o, ""); err != nil {
		s.RolloutError = err.Error()
	}
	return s, nil
}
