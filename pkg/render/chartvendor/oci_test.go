package chartvendor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor/ocitest"
	"github.com/flotilla-gitops/flotilla/test/ociregistry"
)

// ociFixture is a real registry (TLS, basic auth) holding charts pushed
// with Helm's registry client.
type ociFixture struct {
	reg *ociregistry.Registry
	// repo is oci://<host>/charts.
	repo string
	// archives and manifests by "<chart>-<version>".
	archives  map[string][]byte
	manifests map[string]string
}

func newOCIFixture(t *testing.T, charts map[string][]string) *ociFixture {
	t.Helper()
	f := &ociFixture{reg: ociregistry.Start(t), archives: map[string][]byte{}, manifests: map[string]string{}}
	f.repo = "oci://" + f.reg.Host + "/charts"
	for name, versions := range charts {
		for _, v := range versions {
			f.push(t, name, v, "hello")
		}
	}
	return f
}

// push packages and pushes chart name at version whose default message is msg.
func (f *ociFixture) push(t *testing.T, name, version, msg string) {
	t.Helper()
	ch := demoChart(name, version, msg)
	p, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := ocitest.As(f.reg).Push("charts", name, version, data)
	if err != nil {
		t.Fatalf("%v\nregistry log:\n%s", err, f.reg.Log())
	}
	f.archives[name+"-"+version] = data
	f.manifests[name+"-"+version] = digest
}

func (f *ociFixture) digest(name, version string) string {
	sum := sha256.Sum256(f.archives[name+"-"+version])
	return "sha256:" + hex.EncodeToString(sum[:])
}

// options log in through a Docker-format registry config file.
func (f *ociFixture) options(t *testing.T, password string) RegistryOptions {
	t.Helper()
	cfg, err := f.reg.ConfigFile(t.TempDir(), f.reg.Username, password)
	if err != nil {
		t.Fatal(err)
	}
	return RegistryOptions{ConfigFile: cfg, CAFile: f.reg.CAFile}
}

// TestVendorOCICharts: charts pushed with Helm's client to a registry with
// basic auth and TLS are vendored like chart-repository charts: an exact
// version and a range (the highest match, a +build version through its _
// tag), pinned in the lock by archive and manifest digest, and reused
// offline afterwards even when the tag is pushed again.
func TestVendorOCICharts(t *testing.T) {
	f := newOCIFixture(t, map[string][]string{"demo": {"1.0.0", "1.2.0", "1.2.1+build.5", "1.3.0-rc.1", "2.0.0"}})
	root := t.TempDir()
	opts := f.options(t, f.reg.Password)
	refs := []ChartRef{
		{Repo: f.repo, Chart: "demo", Version: "^1.0.0"},
		{Repo: f.repo + "/", Chart: "demo", Version: "2.0.0"},
	}
	want := []string{"1.2.1+build.5", "2.0.0"}
	got, err := opts.VendorCharts(context.Background(), root, refs)
	if err != nil {
		t.Fatalf("%v\nregistry log:\n%s", err, f.reg.Log())
	}
	for i, w := range want {
		g := got[i]
		if g.Version != w || g.Path != "charts/demo/"+w || g.Ref != refs[i] {
			t.Errorf("ref %d: got %+v, want %s", i, g, w)
		}
		if g.Digest != f.digest("demo", w) || g.ManifestDigest != f.manifests["demo-"+w] || !strings.HasPrefix(g.ManifestDigest, "sha256:") {
			t.Errorf("ref %d: digests %s %s, want %s %s", i, g.Digest, g.ManifestDigest, f.digest("demo", w), f.manifests["demo-"+w])
		}
		md, err := chartutil.LoadChartfile(filepath.Join(root, g.Path, "Chart.yaml"))
		if err != nil || md.Version != w {
			t.Errorf("ref %d: vendored Chart.yaml %v, %v", i, md, err)
		}
	}
	lock, err := os.ReadFile(filepath.Join(root, ChartLockFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"repo: " + f.repo + "\n    chart: demo\n    version: ^1.0.0\n    resolved: 1.2.1+build.5\n    digest: " + f.digest("demo", "1.2.1+build.5") +
			"\n    manifestDigest: " + f.manifests["demo-1.2.1+build.5"] + "\n    path: charts/demo/1.2.1+build.5\n",
		"manifestDigest: " + f.manifests["demo-2.0.0"],
	} {
		if !strings.Contains(string(lock), s) {
			t.Errorf("lock lacks %q:\n%s", s, lock)
		}
	}
	for _, secret := range []string{f.reg.Password, f.reg.Username} {
		if strings.Contains(string(lock), secret) {
			t.Errorf("the lock file holds a credential")
		}
	}

	// The vendored chart renders like any other.
	wantString(t, renderVendored(t, root, got[1].Path), "2.0.0", "data", "version")

	// Pinned: 2.0.0 pushed again with other content changes nothing, and
	// the re-run needs no registry (its credentials are wrong now).
	f.push(t, "demo", "2.0.0", "moved")
	again, err := f.options(t, "wrong").VendorCharts(context.Background(), root, refs)
	if err != nil {
		t.Fatalf("offline re-vendor: %v", err)
	}
	for i := range got {
		if again[i] != got[i] {
			t.Errorf("ref %d: %+v then %+v", i, got[i], again[i])
		}
	}
	if lock2, _ := os.ReadFile(filepath.Join(root, ChartLockFile)); string(lock2) != string(lock) {
		t.Error("lock file changed on an offline re-vendor")
	}

	// Username and password given directly work as the config file does.
	direct := RegistryOptions{Username: f.reg.Username, Password: f.reg.Password, CAFile: f.reg.CAFile}
	if got, err := direct.VendorCharts(context.Background(), t.TempDir(), refs[:1]); err != nil || got[0].Version != "1.2.1+build.5" {
		t.Errorf("with username and password: %+v, %v", got, err)
	}
}

// TestVendorOCIChartsErrors: each failure says what happened and where,
// and never carries the password.
func TestVendorOCIChartsErrors(t *testing.T) {
	f := newOCIFixture(t, map[string][]string{"demo": {"1.0.0", "1.1.0"}})
	good := f.options(t, f.reg.Password)
	for i := range 12 {
		f.push(t, "many", fmt.Sprintf("0.%d.0", i+1), "x")
	}
	tests := []struct {
		name  string
		opts  RegistryOptions
		ref   ChartRef
		class error
		field string
		msgs  []string
	}{
		{"wrong password", f.options(t, "not-the-password"), ChartRef{Repo: f.repo, Chart: "demo", Version: "1.0.0"},
			render.ErrChartAuth, "repo", []string{"authentication failed", "registry " + f.reg.Host + " answered 401 Unauthorized", "config.json"}},
		{"wrong password given directly", RegistryOptions{Username: f.reg.Username, Password: "nope", CAFile: f.reg.CAFile}, ChartRef{Repo: f.repo, Chart: "demo", Version: "1.0.0"},
			render.ErrChartAuth, "repo", []string{"401", "user " + f.reg.Username}},
		{"no credentials", RegistryOptions{CAFile: f.reg.CAFile}, ChartRef{Repo: f.repo, Chart: "demo", Version: "1.0.0"},
			render.ErrChartAuth, "repo", []string{"authentication failed", "registry " + f.reg.Host + " requires a login", "Helm's or Docker's registry config"}},
		{"unknown tag", good, ChartRef{Repo: f.repo, Chart: "demo", Version: "9.9.9"},
			render.ErrChartNotFound, "version", []string{`no version matches "9.9.9"; it has 1.1.0, 1.0.0`, f.repo + "/demo"}},
		{"no version in range", good, ChartRef{Repo: f.repo, Chart: "demo", Version: "^2"},
			render.ErrChartNotFound, "version", []string{`"^2"`, "1.1.0, 1.0.0"}},
		{"listing is bounded", good, ChartRef{Repo: f.repo, Chart: "many", Version: "^1"},
			render.ErrChartNotFound, "version", []string{"it has 0.12.0, 0.11.0, 0.10.0, 0.9.0", "0.3.0 and 2 older"}},
		{"unknown chart", good, ChartRef{Repo: f.repo, Chart: "nope", Version: "1.0.0"},
			render.ErrChartNotFound, "chart", []string{"has no chart nope under " + f.repo}},
		{"untrusted certificate", RegistryOptions{ConfigFile: good.ConfigFile}, ChartRef{Repo: f.repo, Chart: "demo", Version: "1.0.0"},
			render.ErrChartRepo, "repo", []string{"unknown authority", "--registry-ca-file"}},
		{"credentials in the URL", good, ChartRef{Repo: "oci://u:p@" + f.reg.Host + "/charts", Chart: "demo", Version: "1.0.0"},
			render.ErrChartRepo, "repo", []string{"host/path only"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			_, err := tc.opts.VendorCharts(context.Background(), root, []ChartRef{tc.ref})
			if !errors.Is(err, tc.class) {
				t.Fatalf("err = %v, want %v", err, tc.class)
			}
			var re *RefError
			if !errors.As(err, &re) || re.Ref != tc.ref || re.Field != tc.field {
				t.Errorf("err %v: RefError %+v, want field %s", err, re, tc.field)
			}
			for _, m := range tc.msgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("err %q does not mention %q", err, m)
				}
			}
			if strings.Contains(err.Error(), f.reg.Password) || strings.Contains(err.Error(), "not-the-password") {
				t.Errorf("err %q holds a password", err)
			}
			if _, err := os.Stat(filepath.Join(root, ChartsDir, tc.ref.Chart)); !os.IsNotExist(err) {
				t.Errorf("failed vendoring left charts/%s behind", tc.ref.Chart)
			}
		})
	}
}
