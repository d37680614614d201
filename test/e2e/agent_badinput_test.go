package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
	"github.com/flotilla-gitops/flotilla/test/fleetrepo"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// badInput is a unit that must fail to render with a clear error while
// the slice's other unit is applied.
type badInput struct {
	name string
	// unit builds the bad unit (its namespace is ns); extra writes files
	// outside the unit directory (a chart, a symlink) into the repo dir.
	unit  func(ns string) handUnit
	extra func(t *testing.T, dir, cluster string)
	// wantError is part of the unit's error in status; leak must not be.
	wantError string
	leak      []string
	// reason is the unit's Ready reason; RenderFailed when empty.
	reason string
}

func badInputs() []badInput {
	kustomization := func(ns string, resources ...string) string {
		return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns + "\nresources:\n  - " + strings.Join(resources, "\n  - ") + "\n"
	}
	return []badInput{
		{
			name: "path-traversal",
			unit: func(ns string) handUnit {
				return handUnit{name: "bad", files: map[string]string{
					// From rendered/<bucket>/<cluster>/bad, this is /etc/passwd.
					"kustomization.yaml": kustomization(ns, "../../../../../../../../etc/passwd"),
				}}
			},
			wantError: "path escapes the repository",
			leak:      []string{"root:x:0:0"},
		},
		{
			name: "symlink-outside",
			unit: func(ns string) handUnit {
				return handUnit{name: "bad", files: map[string]string{"kustomization.yaml": kustomization(ns, "config.yaml")}}
			},
			extra: func(t *testing.T, dir, cluster string) {
				link := filepath.Join(dir, filepath.FromSlash(slice.UnitDir(cluster, "bad")), "config.yaml")
				if err := os.Symlink("/etc/passwd", link); err != nil {
					t.Fatal(err)
				}
			},
			// The agent hashes a unit's sources before it renders them, and
			// refuses a tree that is not what the slice hashed: the link is
			// never followed.
			wantError: "config.yaml is not a regular file",
			reason:    status.ReasonSourceStale,
			leak:      []string{"root:x:0:0"},
		},
		{
			name: "yaml-bomb",
			unit: func(ns string) handUnit {
				bomb := `apiVersion: v1
kind: ConfigMap
metadata:
  name: lol
data:
  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
  i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`
				return handUnit{name: "bad", files: map[string]string{"kustomization.yaml": kustomization(ns, "bomb.yaml"), "bomb.yaml": bomb}}
			},
			wantError: "yaml alias expansion too large",
		},
		{
			name: "50mb-manifest",
			unit: func(ns string) handUnit {
				// Generated here, never committed to the project; part of the
				// unit's files, so the slice's hash covers it as the hub's would.
				big := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  blob: \"" +
					strings.Repeat("0123456789abcdef", 50<<16) + "\"\n"
				return handUnit{name: "bad", files: map[string]string{"kustomization.yaml": kustomization(ns, "big.yaml"), "big.yaml": big}}
			},
			wantError: "size limit exceeded",
			leak:      []string{"0123456789abcdef0123"},
		},
		{
			name: "helm-template-loops",
			unit: func(ns string) handUnit {
				return handUnit{name: "bad", kind: slice.UnitHelm, namespace: ns,
					helm:  &slice.HelmRelease{Chart: "charts/loop", ReleaseName: "loop"},
					files: map[string]string{"values.yaml": "{}\n"}}
			},
			extra: func(t *testing.T, dir, _ string) {
				chart := filepath.Join(dir, "charts", "loop")
				treefile.Write(t, chart, map[string]string{
					"Chart.yaml": "apiVersion: v2\nname: loop\nversion: 0.1.0\n",
					"templates/loop.yaml": `{{- range 1000000 }}{{- range 1000000 }}{{- end }}{{- end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: never
`,
				})
			},
			wantError: "render timed out",
		},
		{
			name: "object-without-kind",
			unit: func(ns string) handUnit {
				return handUnit{name: "bad", files: map[string]string{
					"kustomization.yaml": kustomization(ns, "nokind.yaml"),
					"nokind.yaml":        "apiVersion: v1\nmetadata:\n  name: nokind\ndata:\n  a: b\n",
				}}
			},
			wantError: "object 1 has no kind",
		},
	}
}

// TestAgentBadInput: each bad unit fails to render with a clear error in
// status, nothing of it reaches the cluster, and the slice's good unit is
// applied and Ready.
func TestAgentBadInput(t *testing.T) {
	c := agentCluster(t)
	k := c.Client()
	srv := agentGit(t)
	for _, bi := range badInputs() {
		t.Run(bi.name, func(t *testing.T) {
			cluster := "bad-" + bi.name
			ns := cluster
			dir := t.TempDir()
			good := handUnit{name: "good", files: map[string]string{
				"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ns.yaml\n  - cm.yaml\n",
				"ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n",
				"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\n  namespace: " + ns + "\ndata:\n  ok: \"yes\"\n",
			}}
			writeHandSlice(t, dir, cluster, []handUnit{good, bi.unit(ns)})
			if bi.extra != nil {
				bi.extra(t, dir, cluster)
			}
			repo := fleetrepo.New(t, srv, cluster, dir)
			a := newInprocAgent(t, c, agentSpec{cluster: cluster, repo: repo, renderTimeout: 5 * time.Second})

			start := time.Now()
			st := a.cycle()
			t.Logf("cycle took %s", time.Since(start).Round(time.Millisecond))
			if st.LastError != "" || st.FetchedRevision != repo.Head() {
				t.Fatalf("loop-level failure: %s", describeStatus(st))
			}
			if u := unitOf(st, "good"); !unitIsReady(u) || u.Objects != 2 {
				t.Errorf("good unit not applied:\n%s", describeStatus(st))
			}
			cm := &corev1.ConfigMap{}
			if err := k.Get(testCtx(t), client.ObjectKey{Namespace: ns, Name: "good"}, cm); err != nil {
				t.Errorf("good ConfigMap: %v", err)
			}

			bad := unitOf(st, "bad")
			if bad == nil {
				t.Fatalf("no status for the bad unit:\n%s", describeStatus(st))
			}
			ready := condOf(bad.Conditions, status.ConditionReady)
			wantReason := bi.reason
			if wantReason == "" {
				wantReason = status.ReasonRenderFailed
			}
			if ready == nil || ready.Status != "False" || ready.Reason != wantReason {
				t.Errorf("bad unit conditions: %+v", bad.Conditions)
			}
			if !strings.Contains(bad.LastError, bi.wantError) {
				t.Errorf("bad unit error %q does not say %q", bad.LastError, bi.wantError)
			}
			for _, leak := range bi.leak {
				if strings.Contains(bad.LastError, leak) {
					t.Errorf("bad unit error leaks content %q: %q", leak, bad.LastError)
				}
			}
			if len(bad.LastError) > 2048 {
				t.Errorf("bad unit error is %d bytes long", len(bad.LastError))
			}
			t.Logf("bad unit error: %s", bad.LastError)

			// Nothing of the bad unit reached the cluster.
			chk, err := a.applier.Check(testCtx(t), "bad", nil)
			if err != nil || chk.Exists {
				t.Errorf("bad unit has an inventory: %+v %v", chk, err)
			}
			for id, unit := range managedObjects(t, k, ns) {
				if unit != "good" {
					t.Errorf("%s applied from unit %s", id, unit)
				}
			}
		})
	}
}
