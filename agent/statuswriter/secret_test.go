package statuswriter

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/agent/apply"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/statusdoc"
	"github.com/flotilla-gitops/flotilla/test/testenv"
)

// TestSecretDataNeverReachesGit applies invalid Secrets that carry a marker
// to a real API server through agent/apply, puts the errors into a status
// document — the applier's (masked) error, and the API server's raw
// message, as if some other path had let it through unmasked — commits it
// with the Writer and checks that the marker is nowhere in the committed
// status.yaml, in clear or base64.
func TestSecretDataNeverReachesGit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := testenv.StartCluster(t, testenv.ClusterOptions{Mode: testenv.Minimal})
	for _, ns := range []string{"flotilla-system", "app"} {
		if err := c.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	a, err := apply.New(c.RESTConfig(), apply.Options{InventoryNamespace: "flotilla-system", Cluster: "member1"})
	if err != nil {
		t.Fatal(err)
	}

	// Lower case and no digits: no base64 heuristic catches it, only
	// the structural rules do.
	const marker = "flotilla-secret-marker-qzx"
	b64 := base64.StdEncoding.EncodeToString([]byte(marker))
	manifests := map[string]string{
		// The API server quotes a non-string value back in its error.
		"nested": "apiVersion: v1\nkind: Secret\nmetadata: {name: nested, namespace: app}\ndata:\n  token: {nested: " + marker + "}\n",
		"list":   "apiVersion: v1\nkind: Secret\nmetadata: {name: list, namespace: app}\nstringData:\n  token: [" + marker + "]\n",
		// Invalid base64 in data, with the marker in it.
		"base64": "apiVersion: v1\nkind: Secret\nmetadata: {name: b64, namespace: app}\ndata:\n  token: \"" + marker + "!!\"\n",
	}
	doc := statusdoc.Ready("member1", rev1, "nested", "list", "base64")
	var raw []string
	for unit, m := range manifests {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(m), &obj); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		// What the API server says, unmasked.
		probe := u.DeepCopy()
		//lint:ignore SA1019 a raw server-side apply patch gives the API server's unmasked message
		rawErr := c.Client().Patch(ctx, probe, client.Apply, client.FieldOwner("probe"), client.DryRunAll)
		if rawErr == nil {
			t.Fatalf("%s: the API server accepted the invalid Secret", unit)
		}
		raw = append(raw, rawErr.Error())
		// What agent/apply reports.
		_, err := a.Apply(ctx, apply.UnitRequest{Name: unit, Hash: "1", Objects: []*unstructured.Unstructured{u}})
		if !errors.Is(err, apply.ErrApply) {
			t.Fatalf("%s: Apply: %v, want ErrApply", unit, err)
		}
		statusdoc.FailUnit(doc, unit, status.ReasonApplyFailed, err.Error())
		t.Logf("%s\n  raw:     %v\n  applier: %v", unit, rawErr, err)
	}
	if !strings.Contains(strings.Join(raw, "\n"), marker) {
		t.Fatal("no raw server message quotes the marker; the test would prove nothing")
	}
	doc.LastError = strings.Join(raw, "; ")
	doc.Conditions[0].Message = doc.LastError

	srv, url := startForge(t, nil, "member1")
	w, err := NewWriter(WriterOptions{Cluster: "member1", URL: url, Auth: statusdoc.AgentAuth(srv, "member1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Publish(ctx, doc); err != nil {
		t.Fatal(err)
	}
	committed := gitserver.Git(t, "", "--git-dir="+srv.RepoPath("fleet"), "show", status.RefFor("member1")+":"+status.FileName)
	for _, leak := range []string{marker, b64, marker[:16], strings.TrimRight(b64, "=")[:16]} {
		if strings.Contains(committed, leak) {
			t.Errorf("%q reached Git:\n%s", leak, committed)
		}
	}
	if !strings.Contains(committed, "ApplyFailed") || !strings.Contains(committed, `Secret "nested"`) && !strings.Contains(committed, "Secret/app/nested") {
		t.Errorf("the failure itself is gone from status:\n%s", committed)
	}
	t.Logf("committed:\n%s", committed)
}
