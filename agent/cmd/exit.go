package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Exit causes, the values of flotilla_agent_restarts_total's cause label.
const (
	// ExitLeaseLost: the leader lease could not be renewed (typically the
	// API server was unreachable longer than the renew deadline).
	ExitLeaseLost = "lease-lost"
	// ExitSignal: SIGTERM or SIGINT (pod deleted, rolled out, node drained).
	ExitSignal = "signal"
	// ExitError: run failed otherwise (a client that could not be built,
	// a port in use, …).
	ExitError = "error"
	// ExitUnknown: the process ended without recording why (OOM kill,
	// SIGKILL, a panic).
	ExitUnknown = "unknown"
)

// exitRecordFile, in --cache-dir, remembers why the agent last exited. The
// cache is an emptyDir (or a host path): it survives the container
// restarts this counts and goes with the pod. A ConfigMap would not do:
// when the lease is lost the API server is usually what cannot be reached.
const exitRecordFile = "agent-exits.json"

// exitRecord is the content of exitRecordFile.
type exitRecord struct {
	// Running is set while a process runs; found set at start, the last
	// process ended without recording a cause.
	Running   bool           `json:"running"`
	LastCause string         `json:"lastCause,omitempty"`
	LastExit  time.Time      `json:"lastExit,omitzero"`
	Exits     map[string]int `json:"exits,omitempty"`
}

// exitCause classifies run's result. ctxErr is the signal context's error.
func exitCause(err, ctxErr error) string {
	switch {
	case errors.Is(err, ErrLeaderElectionLost):
		return ExitLeaseLost
	case err == nil && ctxErr != nil, errors.Is(err, context.Canceled) && ctxErr != nil:
		return ExitSignal
	case err == nil:
		return ""
	}
	return ExitError
}

// startExitRecord reads the record of earlier exits, counts a previous
// process that ended without recording its cause as ExitUnknown, and marks
// this one running. A missing or unreadable record starts afresh.
func startExitRecord(dir string, now time.Time) (exitRecord, error) {
	var rec exitRecord
	if b, err := os.ReadFile(filepath.Join(dir, exitRecordFile)); err == nil {
		if json.Unmarshal(b, &rec) != nil {
			rec = exitRecord{}
		}
	}
	if rec.Running {
		rec.add(ExitUnknown, now)
	}
	rec.Running = true
	return rec, writeExitRecord(dir, rec)
}

func (r *exitRecord) add(cause string, at time.Time) {
	if r.Exits == nil {
		r.Exits = map[string]int{}
	}
	r.Exits[cause]++
	r.LastCause, r.LastExit = cause, at.UTC().Truncate(time.Second)
}

// finishExitRecord records this process's exit cause ("" for none: the
// command returned without running the loop).
func finishExitRecord(dir string, rec exitRecord, cause string, now time.Time) error {
	rec.Running = false
	if cause != "" {
		rec.add(cause, now)
	}
	return writeExitRecord(dir, rec)
}

// writeExitRecord replaces the file atomically.
func writeExitRecord(dir string, rec exitRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".agent-exits-*")
	if err != nil {
		return fmt.Errorf("exit record: %w", err)
	}
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("exit record: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, exitRecordFile)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("exit record: %w", err)
	}
	return nil
}
