package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// FileSink writes the status document as YAML to Path, atomically (a
// reader never sees half a document).
type FileSink struct {
	Path string
}

// Publish writes st.
func (s FileSink) Publish(_ context.Context, st *status.ClusterStatus) error {
	b, err := yaml.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.Path), ".status-*")
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write status: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// ReadStatusFile reads a document written by FileSink.
func ReadStatusFile(path string) (*status.ClusterStatus, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	st := &status.ClusterStatus{}
	if err := yaml.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("decode status %s: %w", path, err)
	}
	return st, nil
}

// LogSink logs a one-line summary of each document.
type LogSink struct {
	Logger *slog.Logger
}

// Publish logs st.
func (s LogSink) Publish(_ context.Context, st *status.ClusterStatus) error {
	ready, notReady := 0, 0
	for _, u := range st.Units {
		if unitReady(u) {
			ready++
		} else {
			notReady++
		}
	}
	s.Logger.Info("status",
		"cluster", st.Cluster,
		"desiredRevision", st.DesiredRevision,
		"appliedRevision", st.AppliedRevision,
		"unitsReady", ready,
		"unitsNotReady", notReady,
		"lastError", st.LastError,
	)
	return nil
}

// Sinks publishes to each sink in turn; every sink is tried.
type Sinks []StatusSink

// Publish calls every sink and joins their errors.
func (s Sinks) Publish(ctx context.Context, st *status.ClusterStatus) error {
	var errs []error
	for _, sink := range s {
		if sink != nil {
			errs = append(errs, sink.Publish(ctx, st))
		}
	}
	return errors.Join(errs...)
}

func unitReady(u status.UnitStatus) bool {
	for _, c := range u.Conditions {
		if c.Type == status.ConditionReady {
			return c.Status == "True"
		}
	}
	return false
}
