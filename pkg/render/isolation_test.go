package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/kustomizecli"
)

// isolationRepo holds units that probe what kustomize and Helm keep between
// builds (testdata/isolation/README.md).
const isolationRepo = "testdata/isolation"

func isolationUnits() []slice.Unit {
	var units []slice.Unit
	for _, name := range []string{"schema", "nested-schema", "lists", "custom"} {
		units = append(units, unitAt(name, slice.UnitKustomize, "units/"+name))
	}
	return append(units, helmUnit("api", "units/helm", "charts/envchart", "apps"))
}

// renderAloneEnv asks the test binary to render one unit and exit: the
// reference render, in a process where no other unit was ever built.
const renderAloneEnv = "FLOTILLA_TEST_RENDER_ALONE"

type aloneRequest struct {
	Root string     `json:"root"`
	Unit slice.Unit `json:"unit"`
}

// renderAloneIfRequested serves renderAloneEnv (called from TestMain).
func renderAloneIfRequested() {
	req := os.Getenv(renderAloneEnv)
	if req == "" {
		return
	}
	var r aloneRequest
	if err := json.Unmarshal([]byte(req), &r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	res, err := Unit(context.Background(), r.Root, r.Unit, Options{})
	if err == nil {
		var out []byte
		if out, err = res.YAML(); err == nil {
			_, err = os.Stdout.Write(out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// renderAlone renders u in a fresh process (this test binary).
func renderAlone(t *testing.T, root string, u slice.Unit) []byte {
	t.Helper()
	req, err := json.Marshal(aloneRequest{Root: root, Unit: u})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), renderAloneEnv+"="+string(req))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("render %s alone: %v\n%s", u.Name, err, stderr.String())
	}
	return stdout.Bytes()
}

func renderYAML(root string, u slice.Unit) ([]byte, error) {
	res, err := Unit(context.Background(), root, u, Options{})
	if err != nil {
		return nil, err
	}
	return res.YAML()
}

// TestUnitRendersAsAlone: a unit's objects are a function of its own
// inputs. Each unit is rendered alone in a fresh process; then, in this
// process, every unit right after every other one, and all of them
// together, shuffled and concurrently, several rounds: every render must
// equal the unit's render alone. The units include one whose kustomization
// sets a custom OpenAPI schema (and one that sets it in a kustomization it
// includes), which kustomize keeps in process-wide state.
func TestUnitRendersAsAlone(t *testing.T) {
	units := isolationUnits()
	alone := map[string][]byte{}
	for _, u := range units {
		alone[u.Name] = renderAlone(t, isolationRepo, u)
	}
	checkIsolationReference(t, alone)
	// Alone, a kustomize unit renders as `kustomize build` of its tree.
	for _, u := range units {
		if u.Kind == slice.UnitKustomize {
			t.Run("kustomize build "+u.Name, func(t *testing.T) {
				sameObjects(t, kustomizecli.Objects(t, alone[u.Name]), kustomizecli.Build(t, filepath.Join(isolationRepo, u.Path)))
			})
		}
	}

	check := func(what string, u slice.Unit, got []byte, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %s: %v", what, u.Name, err)
			return
		}
		if !bytes.Equal(got, alone[u.Name]) {
			t.Errorf("%s: %s renders differently than alone:\n%s", what, u.Name, lineDiff(alone[u.Name], got))
		}
	}

	// Every ordered pair, one after the other.
	for _, first := range units {
		for _, then := range units {
			if first.Name == then.Name {
				continue
			}
			got, err := renderYAML(isolationRepo, first)
			check("first of a pair", first, got, err)
			got, err = renderYAML(isolationRepo, then)
			check("after "+first.Name, then, got, err)
		}
	}

	// All together, each unit three times, shuffled and concurrent.
	seed := uint64(time.Now().UnixNano())
	t.Logf("shuffle seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range 8 {
		var batch []slice.Unit
		for range 3 {
			batch = append(batch, units...)
		}
		rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		var wg sync.WaitGroup
		for _, u := range batch {
			wg.Go(func() {
				got, err := renderYAML(isolationRepo, u)
				check(fmt.Sprintf("round %d, concurrent", round), u, got, err)
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}

// checkIsolationReference: the references show kustomize's merges, so the
// property is not satisfied by units that merge nothing: lists merge by
// their keys where the built-in schema, or the unit's own, says so.
func checkIsolationReference(t *testing.T, alone map[string][]byte) {
	t.Helper()
	objs := map[string]*unstructured.Unstructured{}
	for unit, y := range alone {
		for _, o := range kustomizecli.Objects(t, y) {
			objs[unit+"/"+o.GetKind()+"/"+o.GetName()] = o
		}
	}
	names := func(key string, fields ...string) []string {
		t.Helper()
		o := objs[key]
		if o == nil {
			t.Fatalf("no %s rendered", key)
		}
		list, _, err := unstructured.NestedSlice(o.Object, fields...)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		var out []string
		for _, e := range list {
			m, _ := e.(map[string]any)
			out = append(out, fmt.Sprint(m["name"]))
		}
		sort.Strings(out)
		return out
	}
	container := func(key, name string) map[string]any {
		t.Helper()
		list, _, _ := unstructured.NestedSlice(objs[key].Object, "spec", "template", "spec", "containers")
		for _, e := range list {
			if m, _ := e.(map[string]any); m["name"] == name {
				return m
			}
		}
		t.Fatalf("%s has no container %s", key, name)
		return nil
	}
	envOf := func(key, name string) []string {
		t.Helper()
		var out []string
		env, _ := container(key, name)["env"].([]any)
		for _, e := range env {
			out = append(out, fmt.Sprint(e.(map[string]any)["name"]))
		}
		sort.Strings(out)
		return out
	}
	want := func(what string, got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	pod := []string{"spec", "template", "spec"}
	want("lists: containers", names("lists/Deployment/checkout", append(pod, "containers")...), "proxy", "server")
	want("lists: volumes", names("lists/Deployment/checkout", append(pod, "volumes")...), "config", "tls")
	want("lists: server env", envOf("lists/Deployment/checkout", "server"), "DISABLE_PROFILER", "PAYMENT_SERVICE_ADDR", "PORT")
	want("helm: env", envOf("api/Deployment/api", "api"), "LOG_LEVEL", "PORT", "REGION")
	want("helm: volumes", names("api/Deployment/api", append(pod, "volumes")...), "cache", "data")
	for _, key := range []string{"schema/MyResource/service", "nested-schema/MyResource/nested"} {
		c := container(key, "server")
		if c["command"] != "example" || c["ports"] == nil {
			t.Errorf("%s: the custom schema's merge key did not merge the patched container: %v", key, c)
		}
	}
}

// TestKustomizeCLIMatchesRenderer: the kustomize CLI the tests compare
// with is built on the kustomize API this module renders with.
func TestKustomizeCLIMatchesRenderer(t *testing.T) {
	const api = "sigs.k8s.io/kustomize/api"
	if cli, ours := goModVersionIn(t, "../../tools/kustomize/go.mod", api), goModVersion(t, api); cli != ours {
		t.Errorf("tools/kustomize builds on %s %s, the root module on %s: pin the kustomize release built on %s", api, cli, ours, ours)
	}
}

// lineDiff shows the lines of got that differ from want (a short diff for
// a failure message).
func lineDiff(want, got []byte) string {
	wl, gl := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	var b bytes.Buffer
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g []byte
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if !bytes.Equal(w, g) {
			fmt.Fprintf(&b, "line %d:\n  alone:    %s\n  together: %s\n", i+1, w, g)
			if b.Len() > 2000 {
				b.WriteString("  …\n")
				break
			}
		}
	}
	return b.String()
}
