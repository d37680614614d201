package statuswriter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
)

// Status hides clock trouble and impostors: two agents configured with the
// same cluster name must not overwrite each other's status silently.
func TestStatusHidesImpostors_SecondInstanceRefusesToOverwrite(t *testing.T) {
	ctx := context.Background()
	e := newWriterEnv(t, "member1", func(o *WriterOptions) { o.InstanceID = "uid-a" })
	if err := e.w.Publish(ctx, statusdoc.Ready("member1", rev1)); err != nil {
		t.Fatal(err)
	}
	ref := status.RefFor("member1")

	impostorReg := prometheus.NewRegistry()
	impostor, err := NewWriter(WriterOptions{
		Cluster: "member1", URL: e.url, Auth: statusdoc.AgentAuth(e.srv, "member1"), InstanceID: "uid-b",
		HeartbeatInterval: 10 * time.Minute, HeartbeatJitter: -1,
		Registerer: impostorReg, Now: e.clock.Now, Timeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = impostor.Publish(ctx, statusdoc.Ready("member1", rev1, "other"))
	if !errors.Is(err, ErrInstanceConflict) {
		t.Fatalf("impostor's publish: got %v, want ErrInstanceConflict", err)
	}
	if !strings.Contains(err.Error(), "Conflict") || !strings.Contains(err.Error(), "uid-a") {
		t.Errorf("the error should say Conflict and name the ref's instance: %v", err)
	}
	if got := pushCount(t, impostorReg, PushInstanceConflict); got != 1 {
		t.Errorf("flotilla_status_push_total{result=%q} = %v, want 1", PushInstanceConflict, got)
	}
	if !impostor.Pending() {
		t.Error("the refused document should stay pending")
	}
	if doc := e.committed(t, ref); doc.InstanceID != "uid-a" || doc.APIVersion != status.APIVersionV1Alpha2 {
		t.Errorf("the ref's document: instance %q, apiVersion %q; want uid-a's, v1alpha2", doc.InstanceID, doc.APIVersion)
	}
	if n := e.commits(t, ref); n != 1 {
		t.Errorf("%d commits on the ref, want 1", n)
	}

	// The first instance keeps writing undisturbed.
	e.clock.Add(11 * time.Minute)
	if _, err := e.w.Flush(ctx, true); err != nil {
		t.Fatalf("first instance's heartbeat: %v", err)
	}
}

// A re-installed cluster (a new instance) takes the ref over once the old
// instance's heartbeat is older than TakeOverAfter, or at once with TakeOver.
func TestStatusHidesImpostors_ReinstallTakesOver(t *testing.T) {
	ctx := context.Background()
	e := newWriterEnv(t, "member1", func(o *WriterOptions) { o.InstanceID = "uid-old" })
	if err := e.w.Publish(ctx, statusdoc.Ready("member1", rev1)); err != nil {
		t.Fatal(err)
	}
	ref := status.RefFor("member1")
	newWriter := func(id string, takeOver bool) *Writer {
		w, err := NewWriter(WriterOptions{
			Cluster: "member1", URL: e.url, Auth: statusdoc.AgentAuth(e.srv, "member1"), InstanceID: id, TakeOver: takeOver,
			HeartbeatInterval: 10 * time.Minute, HeartbeatJitter: -1, Now: e.clock.Now, Timeout: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	e.clock.Add(DefaultTakeOverHeartbeats*10*time.Minute + time.Minute)
	if err := newWriter("uid-new", false).Publish(ctx, statusdoc.Ready("member1", rev1)); err != nil {
		t.Fatalf("taking over a quiet instance's ref: %v", err)
	}
	if doc := e.committed(t, ref); doc.InstanceID != "uid-new" {
		t.Errorf("the ref's instance is %q, want uid-new", doc.InstanceID)
	}

	if err := newWriter("uid-newer", true).Publish(ctx, statusdoc.Ready("member1", rev1)); err != nil {
		t.Fatalf("explicit take-over of a live instance's ref: %v", err)
	}
	if doc := e.committed(t, ref); doc.InstanceID != "uid-newer" {
		t.Errorf("the ref's instance is %q, want uid-newer", doc.InstanceID)
	}
}

func TestStatusHidesImpostors_InstanceIDIsVersioned(t *testing.T) {
	doc := statusdoc.Ready("member1", rev1)
	data, err := status.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "apiVersion: "+status.APIVersion+"\n") {
		t.Errorf("a document without an instance should stay %s:\n%s", status.APIVersion, data)
	}
	doc.InstanceID = "0b6c5a9e-uid"
	if data, err = status.Encode(doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "apiVersion: "+status.APIVersionV1Alpha2+"\nkind: ClusterStatus\ncluster: member1\ninstanceID: 0b6c5a9e-uid\n") {
		t.Errorf("a document with an instance should be %s with instanceID after cluster:\n%s", status.APIVersionV1Alpha2, data)
	}
	got, err := status.Decode(data)
	if err != nil || got.InstanceID != doc.InstanceID {
		t.Fatalf("Decode: %v, instance %q", err, got.InstanceID)
	}
	old := strings.Replace(string(data), status.APIVersionV1Alpha2, status.APIVersion, 1)
	if _, err := status.Decode([]byte(old)); !errors.Is(err, status.ErrInvalidDocument) {
		t.Errorf("instanceID in a %s document: got %v, want ErrInvalidDocument", status.APIVersion, err)
	}
}
