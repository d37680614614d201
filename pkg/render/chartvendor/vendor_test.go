package chartvendor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/golden"
)

// chartRepo is a real Helm chart repository (index.yaml and packaged
// charts, made with the Helm SDK) served over loopback HTTP.
type chartRepo struct {
	URL      string
	dir      string
	requests atomic.Int64
	srv      *httptest.Server
}

func newChartRepo(t *testing.T, charts map[string][]string) *chartRepo {
	t.Helper()
	r := &chartRepo{dir: t.TempDir()}
	files := http.FileServer(http.Dir(r.dir))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		files.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	r.URL = r.srv.URL + "/stable"
	r.dir = filepath.Join(r.dir, "stable")
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, versions := range charts {
		for _, v := range versions {
			ch := demoChart(name, v, "hello")
			if _, err := chartutil.Save(ch, r.dir); err != nil {
				t.Fatal(err)
			}
		}
	}
	idx, err := repo.IndexDirectory(r.dir, r.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(r.dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *chartRepo) digest(t *testing.T, name, version string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, name+"-"+version+".tgz"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestVendorCharts(t *testing.T) {
	cr := newChartRepo(t, map[string][]string{
		"demo":  {"1.0.0", "1.2.0", "1.3.0-rc.1", "2.0.0"},
		"other": {"0.1.0"},
	})
	root := t.TempDir()
	refs := []ChartRef{
		{Repo: cr.URL, Chart: "demo", Version: "^1.0.0"},
		{Repo: cr.URL + "/", Chart: "demo", Version: ">=1.3.0-0 <2.0.0"},
		{Repo: cr.URL, Chart: "demo", Version: "2.0.0"},
		{Repo: cr.URL, Chart: "other", Version: ""},
		{Repo: cr.URL, Chart: "demo", Version: "^1.0.0"}, // repeated: same answer
	}
	want := []struct{ version, path string }{
		{"1.2.0", "charts/demo/1.2.0"},           // highest stable match, rc excluded
		{"1.3.0-rc.1", "charts/demo/1.3.0-rc.1"}, // the range asks for prereleases
		{"2.0.0", "charts/demo/2.0.0"},
		{"0.1.0", "charts/other/0.1.0"},
		{"1.2.0", "charts/demo/1.2.0"},
	}
	got, err := VendorCharts(context.Background(), root, refs)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		g := got[i]
		if g.Version != w.version || g.Path != w.path || g.Ref != refs[i] {
			t.Errorf("ref %d: got %+v, want version %s at %s", i, g, w.version, w.path)
		}
		if d := cr.digest(t, g.Ref.Chart, g.Version); g.Digest != d {
			t.Errorf("ref %d: digest %s, want %s", i, g.Digest, d)
		}
		md, err := chartutil.LoadChartfile(filepath.Join(root, g.Path, "Chart.yaml"))
		if err != nil || md.Version != w.version {
			t.Errorf("ref %d: vendored Chart.yaml %v, %v", i, md, err)
		}
	}
	lock, err := os.ReadFile(filepath.Join(root, ChartLockFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(lock), slice.GeneratedHeader+"\n") {
		t.Error("lock file lacks the generated header")
	}
	stable := strings.ReplaceAll(string(lock), cr.URL, "http://charts.example/stable")
	for _, v := range []string{"1.2.0", "1.3.0-rc.1", "2.0.0"} {
		stable = strings.ReplaceAll(stable, cr.digest(t, "demo", v), "sha256:<demo-"+v+">")
	}
	stable = strings.ReplaceAll(stable, cr.digest(t, "other", "0.1.0"), "sha256:<other-0.1.0>")
	golden.Assert(t, filepath.Join("testdata", "golden", "charts.lock.yaml"), stable)

	// The vendored chart renders like any chart in the repo.
	wantString(t, renderVendored(t, root, got[0].Path), "1.2.0", "data", "version")

	// A second run is offline: the lock still satisfies every range.
	before := cr.requests.Load()
	cr.srv.Close()
	again, err := VendorCharts(context.Background(), root, refs)
	if err != nil {
		t.Fatalf("offline re-vendor: %v", err)
	}
	if n := cr.requests.Load() - before; n != 0 {
		t.Errorf("offline re-vendor made %d requests", n)
	}
	for i := range got {
		if again[i] != got[i] {
			t.Errorf("ref %d: %+v then %+v", i, got[i], again[i])
		}
	}
	if lock2, _ := os.ReadFile(filepath.Join(root, ChartLockFile)); string(lock2) != string(lock) {
		t.Error("lock file changed on an offline re-vendor")
	}
}

func TestVendorChartsRangeChangeRemovesStale(t *testing.T) {
	cr := newChartRepo(t, map[string][]string{"demo": {"1.0.0", "1.2.0", "2.0.0"}})
	root := t.TempDir()
	if _, err := VendorCharts(context.Background(), root, []ChartRef{{Repo: cr.URL, Chart: "demo", Version: "~1.0.0"}}); err != nil {
		t.Fatal(err)
	}
	got, err := VendorCharts(context.Background(), root, []ChartRef{{Repo: cr.URL, Chart: "demo", Version: ">=2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Version != "2.0.0" {
		t.Fatalf("resolved %s, want 2.0.0", got[0].Version)
	}
	if _, err := os.Stat(filepath.Join(root, "charts/demo/1.0.0")); !os.IsNotExist(err) {
		t.Errorf("stale charts/demo/1.0.0 kept: %v", err)
	}
	lock, _ := os.ReadFile(filepath.Join(root, ChartLockFile))
	if strings.Contains(string(lock), "1.0.0") || !strings.Contains(string(lock), "resolved: 2.0.0") {
		t.Errorf("lock:\n%s", lock)
	}
	// No refs left: the lock and the charts go.
	defer func() {
		if _, err := VendorCharts(context.Background(), root, nil); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{ChartLockFile, "charts/demo"} {
			if _, err := os.Stat(filepath.Join(root, p)); !os.IsNotExist(err) {
				t.Errorf("%s kept after the last ref went: %v", p, err)
			}
		}
	}()
	// A vendored directory that no longer matches its pin is re-fetched.
	if err := os.WriteFile(filepath.Join(root, "charts/demo/2.0.0/Chart.yaml"), []byte("apiVersion: v2\nname: demo\nversion: 9.9.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := cr.requests.Load()
	if _, err := VendorCharts(context.Background(), root, []ChartRef{{Repo: cr.URL, Chart: "demo", Version: ">=2"}}); err != nil {
		t.Fatal(err)
	}
	if cr.requests.Load() == before {
		t.Error("tampered chart directory was reused")
	}
	if md, err := chartutil.LoadChartfile(filepath.Join(root, "charts/demo/2.0.0/Chart.yaml")); err != nil || md.Version != "2.0.0" {
		t.Errorf("re-vendored Chart.yaml: %v %v", md, err)
	}
}

func TestVendorChartsErrors(t *testing.T) {
	cr := newChartRepo(t, map[string][]string{"demo": {"1.0.0"}})
	// A second repository whose index lies about the digest.
	bad := newChartRepo(t, map[string][]string{"demo": {"1.0.0"}})
	idx, err := repo.LoadIndexFile(filepath.Join(bad.dir, "index.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	idx.Entries["demo"][0].Digest = strings.Repeat("0", 64)
	if err := idx.WriteFile(filepath.Join(bad.dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		ref   ChartRef
		class error
		msg   string
	}{
		{"no matching version", ChartRef{Repo: cr.URL, Chart: "demo", Version: "^9.0.0"}, render.ErrChartNotFound, "^9.0.0"},
		{"unknown chart", ChartRef{Repo: cr.URL, Chart: "nope", Version: "1.0.0"}, render.ErrChartNotFound, "nope"},
		{"invalid range", ChartRef{Repo: cr.URL, Chart: "demo", Version: "one"}, render.ErrChartNotFound, "invalid version range"},
		{"chart name with a path", ChartRef{Repo: cr.URL, Chart: "../demo", Version: "1.0.0"}, render.ErrChartNotFound, "invalid chart name"},
		{"digest mismatch", ChartRef{Repo: bad.URL, Chart: "demo", Version: "1.0.0"}, render.ErrChartDigest, "index says sha256:000"},
		{"missing repository", ChartRef{Repo: cr.URL + "/missing", Chart: "demo", Version: "1.0.0"}, render.ErrChartRepo, "404"},
		{"not http or oci", ChartRef{Repo: "ftp://registry.example/charts", Chart: "demo", Version: "1.0.0"}, render.ErrChartRepo, "not an http(s) or oci URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			_, err := VendorCharts(context.Background(), root, []ChartRef{tc.ref})
			if !errors.Is(err, tc.class) {
				t.Fatalf("err = %v, want %v", err, tc.class)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err %q does not mention %q", err, tc.msg)
			}
			entries, _ := os.ReadDir(filepath.Join(root, ChartsDir))
			for _, e := range entries {
				if e.Name() != filepath.Base(ChartLockFile) {
					t.Errorf("failed vendoring left %s behind", e.Name())
				}
			}
		})
	}
}
