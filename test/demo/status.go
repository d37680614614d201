package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/flotilla-gitops/flotilla/hub/fleetview"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// WaitInSync polls `flotilla status` until every cluster is InSync at the
// fleet repo's head, printing each change of a cluster's state.
func (f *Fleet) WaitInSync(ctx context.Context, timeout time.Duration) (*fleetview.View, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := map[string]string{}
	var view *fleetview.View
	for {
		for _, a := range f.agents {
			select {
			case <-a.done:
				return nil, fmt.Errorf("agent %s exited: %s", a.cluster, tailFile(a.logPath, 20))
			default:
			}
		}
		v, err := f.Status(ctx)
		if err == nil {
			view = v
			inSync := 0
			for _, c := range v.Clusters {
				line := fmt.Sprintf("%s %d/%d units ready", c.State, c.UnitsReady, c.UnitsTotal)
				for _, u := range c.FailingUnits {
					line += fmt.Sprintf("; %s: %s", u.Unit, u.Reason)
				}
				if last[c.Name] != line {
					f.logf("  %-8s %s", c.Name, line)
					last[c.Name] = line
				}
				if c.State == fleetview.StateInSync {
					inSync++
				}
			}
			if inSync == len(Clusters) && len(v.Clusters) == len(Clusters) {
				return v, nil
			}
		}
		select {
		case <-ctx.Done():
			msg := "no status read"
			if view != nil {
				var states []string
				for _, c := range view.Clusters {
					states = append(states, c.Name+" "+string(c.State))
				}
				msg = strings.Join(states, ", ")
			}
			if err != nil {
				msg += "; last error: " + err.Error()
			}
			return view, fmt.Errorf("fleet not in sync after %s (%s): %w", timeout, msg, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// DemoJob is the template's GlobalJob (jobs/gpu-smoke.yaml), which the demo
// waits for, and the cluster its placement gives it.
const (
	DemoJob        = "gpu-smoke"
	DemoJobCluster = "member1"
)

// WaitJobCompleted polls `flotilla status jobs` until the agents report
// job name Completed on cluster, printing each change of its phase. A job
// that ends Failed or Aborted is an error at once.
func (f *Fleet) WaitJobCompleted(ctx context.Context, cluster, name string, timeout time.Duration) (*status.JobStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		out, err := f.Run(ctx, "", f.Flotilla(), f.StatusArgs("jobs", "--cluster", cluster, "-o", "json")...)
		if err == nil {
			v := &fleetview.JobsView{}
			if err = json.Unmarshal([]byte(out), v); err != nil {
				return nil, fmt.Errorf("flotilla status jobs -o json: %w", err)
			}
			for _, j := range v.Jobs {
				if j.Cluster != cluster || j.Name != name {
					continue
				}
				line := fmt.Sprintf("job %s on %s: %s (preflight %s; %d running, %d succeeded)", name, cluster, j.Phase, j.Preflight, j.Running, j.Succeeded)
				if line != last {
					f.logf("  %s", line)
					last = line
				}
				switch j.Phase {
				case "Completed":
					return &j.JobStatus, nil
				case "Failed", "Aborted", "Terminated":
					return &j.JobStatus, fmt.Errorf("job %s on %s ended %s: %s", name, cluster, j.Phase, j.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			if last == "" {
				last = "not reported"
			}
			if err != nil {
				last += "; last error: " + err.Error()
			}
			return nil, fmt.Errorf("job %s on %s not Completed after %s (%s): %w", name, cluster, timeout, last, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// Status runs `flotilla status -o json` against the fleet repo.
func (f *Fleet) Status(ctx context.Context) (*fleetview.View, error) {
	out, err := f.Run(ctx, "", f.Flotilla(), f.StatusArgs("-o", "json")...)
	if err != nil {
		return nil, err
	}
	v := &fleetview.View{}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return nil, fmt.Errorf("flotilla status -o json: %w", err)
	}
	return v, nil
}

// StatusArgs are the arguments of `flotilla status` for this fleet.
func (f *Fleet) StatusArgs(extra ...string) []string {
	return append(f.sourceArgs("status", "hub-cache"), extra...)
}

// sourceArgs are command's arguments that read this fleet from its Git
// server, with Git objects cached in cache under Dir.
func (f *Fleet) sourceArgs(command, cache string) []string {
	return []string{command, "--repo", f.RepoURL, "--git-credentials-dir", f.CredentialsDir,
		"--cache-dir", filepath.Join(f.Dir, cache)}
}

// StatusTable is `flotilla status`'s table.
func (f *Fleet) StatusTable(ctx context.Context) (string, error) {
	return f.Run(ctx, "", f.Flotilla(), f.StatusArgs()...)
}
