package statuswriter

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-gitops/flotilla/pkg/gitrepo"
	"github.com/flotilla-gitops/flotilla/pkg/gitrepo/signature"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
	"github.com/flotilla-gitops/flotilla/test/testkeys"
)

const rev1 = "main@sha1:1111111111111111111111111111111111111111"

type writerEnv struct {
	srv   *gitserver.Server
	url   string
	bare  string
	clock *clock
	reg   *prometheus.Registry
	w     *Writer
}

func newWriterEnv(t *testing.T, cluster string, mod func(*WriterOptions)) *writerEnv {
	t.Helper()
	srv, url := startForge(t, nil, "member1", "member2")
	e := &writerEnv{srv: srv, url: url, bare: srv.RepoPath("fleet"), clock: newClock(t0), reg: prometheus.NewRegistry()}
	opts := WriterOptions{
		Cluster: cluster, URL: url, Auth: statusdoc.AgentAuth(srv, cluster),
		HeartbeatInterval: 10 * time.Minute, HeartbeatJitter: -1,
		Registerer: e.reg, Now: e.clock.Now, Timeout: time.Minute,
	}
	if mod != nil {
		mod(&opts)
	}
	w, err := NewWriter(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.w = w
	return e
}

func (e *writerEnv) commits(t *testing.T, ref string) int {
	t.Helper()
	n, err := strconv.Atoi(gitserver.Git(t, "", "--git-dir="+e.bare, "rev-list", "--count", ref))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *writerEnv) committed(t *testing.T, ref string) *status.ClusterStatus {
	t.Helper()
	doc, err := status.Decode([]byte(gitserver.Git(t, "", "--git-dir="+e.bare, "show", ref+":"+status.FileName) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func pushCount(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "flotilla_status_push_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no flotilla_status_push_total{result=%q}", result)
	return 0
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

func TestWriterCommitsChangesOnly(t *testing.T) {
	e := newWriterEnv(t, "member1", nil)
	ctx := context.Background()
	ref := status.RefFor("member1")
	mainBefore := e.srv.Head("fleet", "main")

	// A first document: one commit on the cluster's own ref.
	res, err := e.w.PublishResult(ctx, statusdoc.Ready("member1", rev1, "web", "api"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pushed || res.Heartbeat {
		t.Fatalf("first publish: %+v", res)
	}
	if n := e.commits(t, ref); n != 1 {
		t.Fatalf("%d commits, want 1", n)
	}
	got := e.committed(t, ref)
	if got.Cluster != "member1" || len(got.Units) != 2 || !got.Heartbeat.Time.Equal(t0) || got.HeartbeatInterval.Duration != 10*time.Minute {
		t.Errorf("committed document: %+v", got)
	}
	if who := gitserver.Git(t, "", "--git-dir="+e.bare, "log", "-1", "--format=%an <%ae>|%cn|%s", ref); who != "member1 <agent@member1.flotilla>|member1|status: member1 2/2 units ready at main@sha1:111111111111" {
		t.Errorf("author and subject: %q", who)
	}

	// The same document again (even with a later heartbeat and a
	// revision that moved without touching the slice): no request at all.
	e.clock.Add(time.Minute)
	before := e.srv.Stats("fleet")
	moved := statusdoc.Ready("member1", "main@sha1:2222222222222222222222222222222222222222", "web", "api")
	res, err = e.w.PublishResult(ctx, moved)
	if err != nil || res.Pushed {
		t.Fatalf("unchanged publish: %+v, %v", res, err)
	}
	if d := e.srv.Stats("fleet").Sub(before); d != (gitserver.Stats{}) {
		t.Errorf("an unchanged document cost requests: %+v", d)
	}

	// A meaningful change: one more commit.
	failing := statusdoc.Ready("member1", rev1, "web", "api")
	statusdoc.FailUnit(failing, "api", status.ReasonApplyFailed, "Deployment/default/api dry-run: apply failed: bad")
	res, err = e.w.PublishResult(ctx, failing)
	if err != nil || !res.Pushed || res.Heartbeat {
		t.Fatalf("changed publish: %+v, %v", res, err)
	}
	if n := e.commits(t, ref); n != 2 {
		t.Fatalf("%d commits, want 2", n)
	}
	if got := e.committed(t, ref); got.Units[0].Name != "api" || !status.UnitFailing(got.Units[0]) {
		t.Errorf("the failure was not committed: %+v", got.Units)
	}
	if got := gitserver.Git(t, "", "--git-dir="+e.bare, "show", "--format=", "--name-only", ref); got != status.FileName {
		t.Errorf("the commit changed %q, want only %s", got, status.FileName)
	}

	// Nothing else moved.
	refs, err := e.srv.Refs("fleet")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs["refs/heads/main"] != mainBefore {
		t.Errorf("refs: %v", refs)
	}
	if pushCount(t, e.reg, PushSuccess) != 2 {
		t.Errorf("push_total{success} = %v, want 2", pushCount(t, e.reg, PushSuccess))
	}
	if n := histogramCount(t, e.reg, "flotilla_status_push_duration_seconds"); n != 2 {
		t.Errorf("push duration observations: %d, want 2", n)
	}
}

func TestWriterHeartbeatIsOneSmallCommit(t *testing.T) {
	e := newWriterEnv(t, "member1", nil)
	ctx := context.Background()
	ref := status.RefFor("member1")
	doc := statusdoc.Ready("member1", rev1, "web", "api", "db")
	if err := e.w.Publish(ctx, doc); err != nil {
		t.Fatal(err)
	}
	first := e.committed(t, ref)

	// Just before the interval: nothing.
	e.clock.Add(10*time.Minute - time.Second)
	before := e.srv.Stats("fleet")
	if res, err := e.w.PublishResult(ctx, doc); err != nil || res.Pushed {
		t.Fatalf("early heartbeat: %+v %v", res, err)
	}
	// At the interval: one commit that changes the heartbeat alone.
	e.clock.Add(time.Second)
	res, err := e.w.PublishResult(ctx, doc)
	if err != nil || !res.Pushed || !res.Heartbeat {
		t.Fatalf("heartbeat: %+v %v", res, err)
	}
	d := e.srv.Stats("fleet").Sub(before)
	if d.ReceivePacks != 1 || d.UploadPacks != 0 {
		t.Errorf("a heartbeat cost %+v; want one push and no fetch", d)
	}
	if d.ReceivePackBytes > 4096 {
		t.Errorf("a heartbeat pushed %d bytes", d.ReceivePackBytes)
	}
	t.Logf("heartbeat: %d requests, %d bytes pushed, %d bytes received", d.ReceivePackInfoRefs+d.ReceivePacks, d.ReceivePackBytes, d.BytesSent)
	diff := gitserver.Git(t, "", "--git-dir="+e.bare, "diff", "--unified=0", ref+"~1", ref)
	var changed []string
	for _, l := range strings.Split(diff, "\n") {
		if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++") && !strings.HasPrefix(l, "---") {
			changed = append(changed, l)
		}
	}
	if len(changed) != 2 || !strings.Contains(changed[0], "heartbeat:") || !strings.Contains(changed[1], "heartbeat:") {
		t.Errorf("the heartbeat commit changed more than the heartbeat:\n%s", diff)
	}
	if subject := gitserver.Git(t, "", "--git-dir="+e.bare, "log", "-1", "--format=%s", ref); subject != "heartbeat: member1" {
		t.Errorf("subject %q", subject)
	}
	second := e.committed(t, ref)
	if !second.Heartbeat.After(first.Heartbeat.Time) || status.MeaningfullyChanged(first, second) {
		t.Errorf("heartbeat document: %v → %v", first.Heartbeat, second.Heartbeat)
	}
}

func TestWriterBuffersWhileGitIsDown(t *testing.T) {
	e := newWriterEnv(t, "member1", func(o *WriterOptions) {
		o.RetryBackoff = gitrepo.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}
	})
	ctx := context.Background()
	ref := status.RefFor("member1")
	if err := e.w.Publish(ctx, statusdoc.Ready("member1", rev1)); err != nil {
		t.Fatal(err)
	}

	e.srv.Stop()
	for i := 1; i <= 4; i++ {
		doc := statusdoc.Ready("member1", rev1, "web", "unit-"+strconv.Itoa(i))
		e.clock.Add(time.Minute)
		err := e.w.Publish(ctx, doc)
		if !errors.Is(err, gitrepo.ErrUnreachable) {
			t.Fatalf("publish %d while down: %v, want ErrUnreachable", i, err)
		}
	}
	if !e.w.Pending() || gauge(t, e.reg, "flotilla_status_pending") != 1 {
		t.Fatal("the document is not pending while Git is down")
	}
	if pushCount(t, e.reg, PushUnreachable) != 4 {
		t.Errorf("push_total{unreachable} = %v", pushCount(t, e.reg, PushUnreachable))
	}

	// Git returns: Run pushes the latest document, once.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- e.w.Run(runCtx) }()
	before := e.srv.Stats("fleet")
	if err := e.srv.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.w.Pending() {
		if time.Now().After(deadline) {
			t.Fatalf("still pending after Git returned: %v", e.w.LastError())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // Run would have pushed again by now if it were going to
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := e.srv.Stats("fleet").Sub(before); d.ReceivePacks != 1 {
		t.Errorf("%d pushes after the outage, want 1", d.ReceivePacks)
	}
	if n := e.commits(t, ref); n != 2 {
		t.Errorf("%d commits, want 2 (the one before and one after the outage)", n)
	}
	got := e.committed(t, ref)
	if len(got.Units) != 2 || got.Units[0].Name != "unit-4" {
		t.Errorf("the pushed document is not the latest: %+v", got.Units)
	}
	if gauge(t, e.reg, "flotilla_status_pending") != 0 {
		t.Error("pending gauge still 1")
	}
}

// TestWriterRunHeartbeats: with no new document, Run alone keeps the
// heartbeat going (as it must while an agent's cycle takes long), one
// heartbeat-only commit each time one is due and never more often.
func TestWriterRunHeartbeats(t *testing.T) {
	e := newWriterEnv(t, "member1", func(o *WriterOptions) {
		o.Now = nil // real time: Run sleeps on real timers
		o.HeartbeatInterval = time.Second
	})
	ctx := context.Background()
	ref := status.RefFor("member1")
	if err := e.w.Publish(ctx, statusdoc.Ready("member1", rev1)); err != nil {
		t.Fatal(err)
	}
	// Run until three heartbeats landed (however long a busy machine takes
	// for them); "never more often" is the one-commit-per-second check
	// below, not a count per wall-clock window.
	const wantBeats = 3
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.w.Run(runCtx) }()
	for pushCount(t, e.reg, PushSuccess) < 1+wantBeats && runCtx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	timedOut := runCtx.Err() != nil
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	log := strings.Split(gitserver.Git(t, "", "--git-dir="+e.bare, "log", "--format=%ct %s", ref), "\n")
	beats := len(log) - 1
	if timedOut || beats < wantBeats {
		t.Fatalf("%d heartbeats at a 1s interval, want at least %d:\n%s", beats, wantBeats, strings.Join(log, "\n"))
	}
	seen := map[string]bool{}
	for i, l := range log {
		when, subject, _ := strings.Cut(l, " ")
		if seen[when] {
			t.Errorf("two commits in second %s: a heartbeat before it was due", when)
		}
		seen[when] = true
		if i < beats && subject != "heartbeat: member1" {
			t.Errorf("commit %q is not a heartbeat", l)
		}
	}
	// Not Pending(): on a busy machine the next heartbeat may be due, and
	// its push cancelled, when Run ends; it is then rightly pending.
	if got := pushCount(t, e.reg, PushSuccess); got != float64(beats+1) {
		t.Errorf("%v successful pushes for %d commits", got, beats+1)
	}
}

func TestWriterCannotPushAnotherClustersRef(t *testing.T) {
	// member1's agent credentials, writing as member2: the server refuses.
	e := newWriterEnv(t, "member1", nil)
	w, err := NewWriter(WriterOptions{Cluster: "member2", URL: e.url, Auth: statusdoc.AgentAuth(e.srv, "member1"), Registerer: e.reg, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := e.srv.Refs("fleet")
	err = w.Publish(context.Background(), statusdoc.Ready("member2", rev1))
	if !errors.Is(err, gitrepo.ErrRejected) {
		t.Fatalf("push to another cluster's ref: %v, want ErrRejected", err)
	}
	if !strings.Contains(err.Error(), "may not push refs/heads/flotilla/status/member2") {
		t.Errorf("error does not carry the server's reason: %v", err)
	}
	after, _ := e.srv.Refs("fleet")
	if len(after) != len(before) {
		t.Errorf("refs changed: %v → %v", before, after)
	}
	if pushCount(t, e.reg, PushRejected) != 1 {
		t.Errorf("push_total{rejected} = %v", pushCount(t, e.reg, PushRejected))
	}
	// A document naming another cluster is refused before any push.
	if err := e.w.Publish(context.Background(), statusdoc.Ready("member2", rev1)); !errors.Is(err, status.ErrInvalidDocument) {
		t.Errorf("a document for member2 through member1's writer: %v", err)
	}
}

func TestWriterBoundsHistoryAndSigns(t *testing.T) {
	key := testkeys.SSHSeeded(t, 7, "")
	signer, pub := key.Signer, key.Line()
	e := newWriterEnv(t, "member1", func(o *WriterOptions) {
		o.MaxHistory = 3
		o.Signer = signer
	})
	ctx := context.Background()
	ref := status.RefFor("member1")
	for i := 0; i < 7; i++ {
		if err := e.w.Publish(ctx, statusdoc.Ready("member1", rev1, "web", "u"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		if n := e.commits(t, ref); n > 3 {
			t.Fatalf("after %d pushes the ref holds %d commits, more than MaxHistory 3", i+1, n)
		}
	}
	if got := e.committed(t, ref); got.Units[0].Name != "u6" {
		t.Errorf("latest document lost in a squash: %+v", got.Units)
	}
	refs, err := gitrepo.ReadRefs(ctx, e.bare, status.RefPrefix, gitrepo.ReadOptions{File: status.FileName})
	if err != nil || len(refs) != 1 {
		t.Fatalf("ReadRefs: %v %v", refs, err)
	}
	kr, err := signature.ParseKeyRing(map[string][]byte{"member1": []byte(pub)})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := refs[0].Verify(kr); err != nil || v.Format != "ssh" {
		t.Errorf("status commit signature: %+v %v", v, err)
	}
}

func TestNewWriterValidates(t *testing.T) {
	if _, err := NewWriter(WriterOptions{URL: "http://x"}); err == nil {
		t.Error("no cluster accepted")
	}
	if _, err := NewWriter(WriterOptions{Cluster: "c"}); err == nil {
		t.Error("no URL accepted")
	}
	// Two writers may share a registry.
	reg := prometheus.NewRegistry()
	for i := 0; i < 2; i++ {
		if _, err := NewWriter(WriterOptions{Cluster: "c" + strconv.Itoa(i), URL: "http://x", Registerer: reg}); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
}

func TestWriterJitter(t *testing.T) {
	w, err := NewWriter(WriterOptions{Cluster: "c", URL: "http://x", HeartbeatInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := time.Hour, time.Duration(0)
	for i := 0; i < 200; i++ {
		d := w.jittered()
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 54*time.Minute || hi > 66*time.Minute || hi-lo < 5*time.Minute {
		t.Errorf("jittered heartbeat between %v and %v; want spread over 1h ± 10%%", lo, hi)
	}
}
