package cmd

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// The agent identifies its cluster instance by kube-system's UID, read
// from a real API server; an agent that may not (or cannot) read it still
// writes status, without an instance ID, and says so in its log.
func TestClusterInstanceIDFromAPIServer(t *testing.T) {
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal, Users: []testenv.User{{Name: "no-rights"}}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var kubeSystem corev1.Namespace
	if err := c.Client().Get(ctx, ctrlclient.ObjectKey{Name: metav1.NamespaceSystem}, &kubeSystem); err != nil {
		t.Fatal(err)
	}
	if kubeSystem.UID == "" {
		t.Fatal("kube-system has no UID")
	}
	srv := gitserver.Start(t, gitserver.ForgeConfig("member1"))
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/README.md", []byte("fleet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.MustCreateRepo(t, "fleet", dir)

	t.Run("admin reads kube-system's UID", func(t *testing.T) {
		id, err := clusterInstanceID(ctx, c.Client())
		if err != nil || id != string(kubeSystem.UID) {
			t.Fatalf("clusterInstanceID = %q, %v; want %q", id, err, kubeSystem.UID)
		}
		// Read again, it is the same: the UID lives as long as the cluster.
		if again, err := clusterInstanceID(ctx, c.Client()); err != nil || again != id {
			t.Errorf("second read %q, %v; want %q", again, err, id)
		}
		logs, log := testLogger()
		if got := statusInstanceID(ctx, c.Client(), log); got != id {
			t.Errorf("statusInstanceID = %q, want %q", got, id)
		}
		if strings.Contains(logs.String(), "without an instance ID") {
			t.Errorf("a warning although the read succeeded: %s", logs)
		}
	})

	t.Run("forbidden read: status without an instance ID", func(t *testing.T) {
		token, ok := c.Token("no-rights")
		if !ok {
			t.Fatal("no token for no-rights")
		}
		path, err := c.KubeconfigFor("no-rights", token)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		cl := newClient(t, cfg)
		id, err := clusterInstanceID(ctx, cl)
		if !apierrors.IsForbidden(err) || id != "" {
			t.Fatalf("clusterInstanceID as a user without rights = %q, %v; want \"\", Forbidden", id, err)
		}
		if !strings.Contains(err.Error(), metav1.NamespaceSystem) {
			t.Errorf("the error should name %s: %v", metav1.NamespaceSystem, err)
		}
		logs, log := testLogger()
		instance := statusInstanceID(ctx, cl, log)
		if instance != "" {
			t.Fatalf("statusInstanceID = %q, want \"\"", instance)
		}
		if !strings.Contains(logs.String(), `"level":"WARN"`) || !strings.Contains(logs.String(), "without an instance ID") ||
			!strings.Contains(logs.String(), "forbidden") {
			t.Errorf("want a warning naming the forbidden read, log: %s", logs)
		}
		doc := publishStatus(t, ctx, srv, instance)
		if doc.InstanceID != "" {
			t.Errorf("the committed document has instance %q, want none", doc.InstanceID)
		}
	})

	t.Run("failed read: status without an instance ID", func(t *testing.T) {
		// An API server that is gone: the connection is refused.
		dead := c.RESTConfig()
		dead.Host = "https://127.0.0.1:1"
		dead.Timeout = 10 * time.Second
		cl := newClient(t, dead)
		if id, err := clusterInstanceID(ctx, cl); err == nil || id != "" {
			t.Fatalf("clusterInstanceID against no API server = %q, %v; want an error", id, err)
		}
		logs, log := testLogger()
		instance := statusInstanceID(ctx, cl, log)
		if instance != "" || !strings.Contains(logs.String(), "without an instance ID") {
			t.Fatalf("statusInstanceID = %q, log: %s; want \"\" and a warning", instance, logs)
		}
		doc := publishStatus(t, ctx, srv, instance)
		if doc.InstanceID != "" {
			t.Errorf("the committed document has instance %q, want none", doc.InstanceID)
		}
	})
}

func newClient(t *testing.T, cfg *rest.Config) ctrlclient.Client {
	t.Helper()
	cl, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testLogger() (*syncBuffer, *slog.Logger) {
	buf := &syncBuffer{}
	return buf, newLogger(&options{logFormat: "json", logLevel: "info"}, buf)
}

// publishStatus builds the agent's status writer for member1 from its
// flags, as run does, with instance, publishes a document and returns the
// one committed on member1's status ref.
func publishStatus(t *testing.T, ctx context.Context, srv *gitserver.Server, instance string) *status.ClusterStatus {
	t.Helper()
	o, err := parse(t, []string{"--cluster-name", "member1", "--repo-url", srv.URL("fleet"), "--cache-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newStatusWriter(o, statusdoc.AgentAuth(srv, "member1"), prometheus.NewRegistry(), instance)
	if err != nil {
		t.Fatal(err)
	}
	rev := srv.Head("fleet", "main")
	doc := &status.ClusterStatus{
		Cluster: "member1", Agent: status.Agent{Version: "test"},
		DesiredRevision: rev, FetchedRevision: rev, AppliedRevision: rev,
	}
	if err := w.Publish(ctx, doc); err != nil {
		t.Fatalf("publish without an instance ID: %v", err)
	}
	out, err := exec.CommandContext(ctx, "git", "--git-dir", srv.RepoPath("fleet"), "show",
		gitserver.StatusRef("member1")+":"+status.FileName).Output()
	if err != nil {
		t.Fatalf("git show: %v", err)
	}
	committed, err := status.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if committed.Cluster != "member1" || committed.AppliedRevision != rev {
		t.Errorf("committed document: cluster %q, applied %q; want member1, %s", committed.Cluster, committed.AppliedRevision, rev)
	}
	return committed
}
