package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzLoad feeds one arbitrary document, as each kind, through decoding and
// validation against the testdata/good repo. It must never panic or hang,
// and every problem must carry a class.
func FuzzLoad(f *testing.F) {
	var base []*loaded
	err := filepath.WalkDir("testdata/good", func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f.Add(data)
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		clusterHead + "  labels: &l {a: b}\n  annotations: {<<: *l}\n",
		clusterHead + "spec: &s\n  apiVersions: [*s]\n",
		"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n",
		"- a\n",
		"apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata: {name: production}\nspec:\n  clusters: [member1]\n  rollout:\n    bake: 10m\n    waves: [{clusters: [member1]}, {selector: {matchLabels: {env: production}}}, {percent: 60}, {count: 1, maxFailures: 1}]\n",
		"a: 1\n---\nb: 2\n",
		app(manifestsSource + "  dependsOn: [web]\n  syncPolicies: [{destination: {fleet: production}, overrides: {patches: [{patch: '- op: add'}]}}]\n"),
		goodProvider, goodAlert,
	} {
		f.Add([]byte(seed))
	}
	inputs, err := findInputs("testdata/good")
	if err != nil {
		f.Fatal(err)
	}
	for _, in := range inputs {
		res, err := loadFile("testdata/good", in)
		if err != nil {
			f.Fatal(err)
		}
		base = append(base, res)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// A hang is a failure too: report it with the input. A minute is
		// far beyond any parse, even on a busy machine.
		done := make(chan struct{})
		timer := time.AfterFunc(time.Minute, func() {
			select {
			case <-done:
			default:
				panic(fmt.Sprintf("FuzzLoad: no result after a minute for %q", data))
			}
		})
		defer func() { close(done); timer.Stop() }()
		for _, kind := range []struct{ kind, file, name string }{
			{KindCluster, "clusters/fuzz.yaml", "fuzz"},
			{KindFleet, "fleets/production.yaml", "production"},
			{KindApplication, "apps/nginx/app.yaml", "nginx"},
			{KindGlobalJob, "jobs/fuzz.yaml", "fuzz"},
			{KindTrafficRoute, "routes/fuzz.yaml", "fuzz"},
			{KindFleetPolicy, "policies/fuzz.yaml", "fuzz"},
			{KindProvider, "notifications/providers/fuzz.yaml", "fuzz"},
			{KindAlert, "notifications/alerts/fuzz.yaml", "fuzz"},
		} {
			d, obj, decoded := decodeDocument(kind.file, data, kind.kind, kind.name)
			results := []*loaded{{in: input{rel: kind.file, kind: kind.kind, name: kind.name}, doc: d, obj: obj, decoded: decoded}}
			for _, b := range base {
				if b.in.rel != kind.file {
					// Validation records problems in the documents: copy.
					cp := *b.doc
					cp.errs = append([]*FieldError(nil), b.doc.errs...)
					results = append(results, &loaded{in: b.in, doc: &cp, obj: b.obj, decoded: b.decoded})
				}
			}
			v := newValidator(&Repo{Root: "testdata/good"}, results)
			v.run()
			for _, e := range append(v.errs, v.r.Warnings...) {
				if e.Kind == nil || e.File == "" {
					t.Fatalf("problem without class or file: %#v", e)
				}
			}
		}
	})
}
