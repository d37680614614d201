package plan

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/flotilla-gitops/flotilla/hub/fleetrender"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

// hasRollout reports whether an application of the side has waves.
func (s *side) hasRollout() bool {
	for _, a := range s.repo.Applications {
		if s.repo.RolloutOf(a) != nil {
			return true
		}
	}
	return false
}

// committedTree is where the side's compile finds the units its rollouts
// hold: the working tree, or the commit's rendered/ exported into dir
// (only when the side has a rollout).
func (s *side) committedTree(ctx context.Context, top, prefix, dir, workTree string) (fleetrender.CommittedTree, error) {
	if s.commit == "" {
		return fleetrender.CommittedAt(workTree), nil
	}
	if !s.hasRollout() {
		return nil, nil
	}
	paths := make([]string, 0, len(s.rendered))
	for p := range s.rendered {
		paths = append(paths, path.Join(filepath.ToSlash(prefix), p))
	}
	sort.Strings(paths)
	if err := gitrepo.ExportTreePaths(ctx, top, s.commit, dir, paths); err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return fleetrender.CommittedAt(filepath.Join(dir, prefix)), nil
}

// writeShared puts the compile's snapshots into the side's copy, where the
// units under a rollout read their sources.
func (s *side) writeShared() error {
	for _, f := range s.out.Shared {
		if !strings.HasPrefix(f.Path, fleetrender.SnapshotDir+"/") {
			continue
		}
		p := filepath.Join(s.root, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// rolloutNotes say, per application under a rollout whose state the change
// moves, which clusters get its revision now and which are held for later
// waves — loudly when --all-waves released every wave at once.
func rolloutNotes(base, head *fleetrender.Output) []string {
	before := map[string]fleetrender.RolloutResult{}
	for _, r := range base.Rollouts {
		before[r.Application] = r
	}
	var notes []string
	for _, r := range head.Rollouts {
		st := r.State
		b, ok := before[r.Application]
		if ok && b.State.Revision == st.Revision && b.State.Released == st.Released && b.State.Aborted == st.Aborted {
			continue
		}
		rev := strings.TrimPrefix(st.Revision, "sha256:")[:12]
		switch {
		case strings.Contains(st.Reason, "--all-waves"):
			notes = append(notes, fmt.Sprintf("rollout %s: ALL WAVES AT ONCE (render --all-waves): revision %s reaches every cluster now, none is held", r.Application, rev))
		case st.Aborted:
			notes = append(notes, fmt.Sprintf("rollout %s: ABORTED: clusters go back from revision %s to their last unit Ready there: %s", r.Application, rev, st.AbortTargets()))
		case len(r.Held) == 0:
			notes = append(notes, fmt.Sprintf("rollout %s: revision %s, %d of %d waves released; no cluster held", r.Application, rev, st.Released, st.Waves))
		default:
			notes = append(notes, fmt.Sprintf("rollout %s: revision %s reaches the clusters of %d of %d waves now; held for later waves: %s",
				r.Application, rev, st.Released, st.Waves, clusterList(r.Held)))
		}
	}
	return notes
}
