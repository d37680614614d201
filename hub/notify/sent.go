package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flotilla-gitops/flotilla/hub/forge"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
)

// RecordRef is the fleet repo's ref that records the statuses sent, so
// that runs of notify (the rollout job's and its schedule's, at once or
// after a restart) send each change once.
const RecordRef = "refs/flotilla/notify"

const (
	recordFile = "sent.json"
	// maxRecorded bounds the record: the newest statuses sent.
	maxRecorded = 1000
	// casAttempts bounds the read-compare-push rounds of one update.
	casAttempts = 8
)

// errRecordMoved: another run changed the record between our read and
// our push; read it again.
var errRecordMoved = errors.New("notify record moved")

type record struct {
	// Statuses sent, oldest first; one per commit and context.
	Statuses []forge.CommitStatus `json:"statuses"`
	// Facts told, per provider: subject → value (Fact).
	Facts map[string]map[string]string `json:"facts,omitempty"`
}

func (r *record) index(s forge.CommitStatus) int {
	for i, x := range r.Statuses {
		if x.Commit == s.Commit && x.Context == s.Context {
			return i
		}
	}
	return -1
}

// sent reports whether s is what was last sent for its commit and context.
func (r *record) sent(s forge.CommitStatus) bool {
	i := r.index(s)
	return i >= 0 && r.Statuses[i] == s
}

func (r *record) put(s forge.CommitStatus) {
	if i := r.index(s); i >= 0 {
		r.Statuses = append(r.Statuses[:i], r.Statuses[i+1:]...)
	}
	r.Statuses = append(r.Statuses, s)
	if n := len(r.Statuses) - maxRecorded; n > 0 {
		r.Statuses = r.Statuses[n:]
	}
}

// Pending are the statuses last sent as pending, newest first: those
// whose commits may follow the head (Follow).
func (rec *Recorder) Pending(ctx context.Context) ([]forge.CommitStatus, error) {
	data, err := rec.read(ctx)
	if err != nil || len(data) == 0 {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", RecordRef, recordFile, err)
	}
	var out []forge.CommitStatus
	for i := len(r.Statuses) - 1; i >= 0; i-- {
		if r.Statuses[i].State == forge.StatePending {
			out = append(out, r.Statuses[i])
		}
	}
	return out, nil
}

// Delivery is one event due to one provider, with what the provider was
// told of its subject before, to give back if the send fails.
type Delivery struct {
	Route Route
	Fact  Fact
	prev  string
	seen  bool
}

// ClaimEvents records the facts as told to every route's provider and
// returns the events due: a fact whose value changed and tells something
// the route's alerts want. At most max per provider: the rest are left as
// they were, for the next run (a rate limit). Facts of subjects no longer
// observed and providers no longer configured are forgotten.
func (rec *Recorder) ClaimEvents(ctx context.Context, routes []Route, facts []Fact, max int) ([]Delivery, error) {
	var due []Delivery
	owners := map[string]bool{}
	for _, f := range facts {
		owners[owner(f.Subject)] = true
	}
	err := rec.update(ctx, "notify: telling", func(r *record) {
		due = due[:0]
		if r.Facts == nil {
			r.Facts = map[string]map[string]string{}
		}
		configured := map[string]bool{}
		for _, rt := range routes {
			name := rt.Provider.Metadata.Name
			configured[name] = true
			told, baseline := r.Facts[name], r.Facts[name] == nil
			if baseline {
				told = map[string]string{}
				r.Facts[name] = told
			}
			for subject := range told {
				if !owners[owner(subject)] {
					delete(told, subject)
				}
			}
			n := 0
			for _, f := range facts {
				prev, seen := told[f.Subject]
				if seen && prev == f.Value {
					continue
				}
				if f.tells(prev, seen, baseline) && rt.Wants(f.Event) {
					if n == max {
						continue
					}
					n++
					due = append(due, Delivery{Route: rt, Fact: f, prev: prev, seen: seen})
				}
				told[f.Subject] = f.Value
			}
		}
		for name := range r.Facts {
			if !configured[name] {
				delete(r.Facts, name)
			}
		}
	})
	return due, err
}

// ReleaseEvents gives back claimed events whose sends failed: their
// providers are told again by the next run (unless the facts changed
// since).
func (rec *Recorder) ReleaseEvents(ctx context.Context, failed []Delivery) error {
	if len(failed) == 0 {
		return nil
	}
	return rec.update(ctx, "notify: events not sent, to be retried", func(r *record) {
		for _, d := range failed {
			told := r.Facts[d.Route.Provider.Metadata.Name]
			if told == nil || told[d.Fact.Subject] != d.Fact.Value {
				continue
			}
			if d.seen {
				told[d.Fact.Subject] = d.prev
			} else {
				delete(told, d.Fact.Subject)
			}
		}
	})
}

// owner is the object a fact's subject belongs to: "cluster/a1",
// "rollout/web" (of "rollout/web/wave/early").
func owner(subject string) string {
	kind, rest, _ := strings.Cut(subject, "/")
	name, _, _ := strings.Cut(rest, "/")
	return kind + "/" + name
}

// Recorder keeps the record on RecordRef of a remote.
type Recorder struct {
	Remote string
	Auth   gitrepo.Auth
	Author gitrepo.Signature
}

// Claim records, of statuses, those not sent yet as sent and returns them:
// this run sends them. A status another run recorded first is not
// returned. Release gives back one whose send failed.
func (rec *Recorder) Claim(ctx context.Context, statuses []forge.CommitStatus) ([]forge.CommitStatus, error) {
	var due []forge.CommitStatus
	err := rec.update(ctx, "notify: sending", func(r *record) {
		due = due[:0]
		for _, s := range statuses {
			if !r.sent(s) {
				due = append(due, s)
				r.put(s)
			}
		}
	})
	return due, err
}

// Release forgets a claimed status whose send failed, so the next run
// sends it again (unless a later run recorded something else since).
func (rec *Recorder) Release(ctx context.Context, s forge.CommitStatus) error {
	return rec.update(ctx, "notify: send failed, to be retried", func(r *record) {
		if i := r.index(s); i >= 0 && r.Statuses[i] == s {
			r.Statuses = append(r.Statuses[:i], r.Statuses[i+1:]...)
		}
	})
}

// update reads the record, changes it and pushes it, as a compare-and-
// swap: the push goes only onto the head it read.
func (rec *Recorder) update(ctx context.Context, msg string, change func(*record)) error {
	for range casAttempts {
		old, err := rec.read(ctx)
		if err != nil {
			return err
		}
		var r record
		if len(old) > 0 {
			if err := json.Unmarshal(old, &r); err != nil {
				return fmt.Errorf("%s: %s: %w", RecordRef, recordFile, err)
			}
		}
		change(&r)
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		data = append(data, '\n')
		if bytes.Equal(data, old) {
			return nil
		}
		guard := func(_ string, read func(string) ([]byte, bool, error)) error {
			head, _, err := read(recordFile)
			if err != nil {
				return err
			}
			if !bytes.Equal(head, old) {
				return errRecordMoved
			}
			return nil
		}
		_, err = gitrepo.PushFiles(ctx, rec.Remote, RecordRef, map[string][]byte{recordFile: data}, msg, rec.Author,
			gitrepo.PushOptions{Auth: rec.Auth, MaxHistory: 50, Guard: guard})
		if errors.Is(err, errRecordMoved) {
			continue
		}
		if err != nil {
			return fmt.Errorf("record sent statuses on %s: %w", RecordRef, err)
		}
		return nil
	}
	return fmt.Errorf("record sent statuses on %s: %w", RecordRef, gitrepo.ErrConflict)
}

// read returns the record's file at RecordRef's head; nil when there is
// none yet.
func (rec *Recorder) read(ctx context.Context) ([]byte, error) {
	refs, err := gitrepo.ReadRefs(ctx, rec.Remote, RecordRef, gitrepo.ReadOptions{Auth: rec.Auth, File: recordFile})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", RecordRef, err)
	}
	for _, r := range refs {
		if r.Ref == RecordRef && r.FileFound {
			return r.File, nil
		}
	}
	return nil, nil
}

// Send claims statuses and sends the claimed ones to f, releasing each
// whose send fails. It returns the statuses sent and the failures.
func Send(ctx context.Context, f *forge.Client, rec *Recorder, statuses []forge.CommitStatus) ([]forge.CommitStatus, error) {
	due, err := rec.Claim(ctx, statuses)
	if err != nil {
		return nil, err
	}
	var sent []forge.CommitStatus
	var errs []error
	for _, s := range due {
		if err := f.SetStatus(ctx, s); err != nil {
			errs = append(errs, err)
			if rerr := rec.Release(ctx, s); rerr != nil {
				errs = append(errs, rerr)
			}
			continue
		}
		sent = append(sent, s)
	}
	return sent, errors.Join(errs...)
}
