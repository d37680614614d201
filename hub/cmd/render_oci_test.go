package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor"
	"github.com/flotilla-gitops/flotilla/pkg/render/chartvendor/ocitest"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/ociregistry"
)

const redisCacheChart = "../../test/fixtures/charts/redis-cache"

// TestRenderVendorsFromOCIRegistry: an application whose chart is in an
// OCI registry (TLS, basic auth; pushed with Helm's client) is vendored by
// `flotilla render` at the highest version its range allows, pinned by
// digest in the lock; a wrong password and a version the registry lacks
// are errors at the application's field; a later --check needs no
// registry.
func TestRenderVendorsFromOCIRegistry(t *testing.T) {
	reg := ociregistry.Start(t)
	pusher := ocitest.As(reg)
	manifests, err := pusher.PushDir("charts", redisCacheChart, "0.2.0", "0.3.0", "0.3.1", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	ociRepo := "oci://" + reg.Host + "/charts"
	repo := copyTree(t, templateDir)
	appFile := filepath.Join(repo, "apps", "redis-cache", "app.yaml")
	editFile(t, appFile, "repo: https://charts.example.com/flotilla", "repo: "+ociRepo)
	editFile(t, appFile, "version: 0.2.0", "version: 9.9.9")
	good, err := reg.ConfigFile(t.TempDir(), reg.Username, reg.Password)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := reg.ConfigFile(t.TempDir(), reg.Username, "wrong-password")
	if err != nil {
		t.Fatal(err)
	}

	errorTests := []struct {
		name   string
		config string
		want   []string
	}{
		{"wrong password", bad, []string{
			"apps/redis-cache/app.yaml:8: spec.source.helm.repo: chart registry authentication failed",
			"registry " + reg.Host + " answered 401 Unauthorized",
		}},
		{"unknown version", good, []string{
			"apps/redis-cache/app.yaml:10: spec.source.helm.version: chart version not found",
			`no version matches "9.9.9"; it has 1.0.0, 0.3.1, 0.3.0, 0.2.0`,
		}},
	}
	for _, tc := range errorTests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, "render", "--repo", repo, "--registry-config", tc.config, "--registry-ca-file", reg.CAFile)
			if code != ExitError {
				t.Fatalf("exit %d, want %d\n%s%s", code, ExitError, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			t.Logf("stderr:\n%s", stderr)
			if strings.Contains(stderr, "wrong-password") || strings.Contains(stderr, reg.Password) {
				t.Errorf("stderr holds a password:\n%s", stderr)
			}
		})
	}

	editFile(t, appFile, "version: 9.9.9", "version: ~0.3.0")
	stdout, stderr, code := runCLI(t, "render", "--repo", repo, "-o", "json", "--registry-config", good, "--registry-ca-file", reg.CAFile)
	if code != ExitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var sum renderSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	var got *chartSummary
	for i := range sum.Charts {
		if sum.Charts[i].Chart == "redis-cache" {
			got = &sum.Charts[i]
		}
	}
	want := chartSummary{Repo: ociRepo, Chart: "redis-cache", Version: "0.3.1", ManifestDigest: manifests["0.3.1"], Path: "charts/redis-cache/0.3.1"}
	if got == nil || !strings.HasPrefix(got.Digest, "sha256:") {
		t.Fatalf("charts = %+v", sum.Charts)
	}
	g := *got
	g.Digest = ""
	if g != want {
		t.Errorf("redis-cache = %+v, want %+v", *got, want)
	}
	lock, err := os.ReadFile(filepath.Join(repo, chartvendor.ChartLockFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lock), "resolved: 0.3.1\n    digest: "+got.Digest+"\n    manifestDigest: "+manifests["0.3.1"]+"\n") {
		t.Errorf("lock does not pin redis-cache 0.3.1 by digest:\n%s", lock)
	}
	if _, err := os.Stat(filepath.Join(repo, "charts/redis-cache/0.2.0")); !os.IsNotExist(err) {
		t.Errorf("the HTTP chart's copy is kept: %v", err)
	}
	s, err := slice.Read(repo, "member1")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, u := range s.Units {
		found = found || (u.Name == "redis-cache" && u.Helm != nil && u.Helm.Chart == "charts/redis-cache/0.3.1")
	}
	if !found {
		t.Errorf("member1 has no redis-cache unit from charts/redis-cache/0.3.1: %+v", s.Units)
	}

	// Pinned: a newer match pushed later changes nothing, and no
	// credentials are needed.
	if _, err := pusher.PushDir("charts", redisCacheChart, "0.3.2"); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := runCLI(t, "render", "--check", "--repo", repo); code != ExitOK {
		t.Fatalf("pinned check: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// The user and password may come from flags and standard input.
	fresh := copyTree(t, templateDir)
	freshApp := filepath.Join(fresh, "apps", "redis-cache", "app.yaml")
	editFile(t, freshApp, "repo: https://charts.example.com/flotilla", "repo: "+ociRepo)
	editFile(t, freshApp, "version: 0.2.0", "version: ^0.3.0")
	stdout, stderr, code = runCLIStdin(t, reg.Password+"\n", "render", "--repo", fresh, "--registry-username", reg.Username, "--registry-password-stdin", "--registry-ca-file", reg.CAFile)
	if code != ExitOK {
		t.Fatalf("with --registry-password-stdin: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(fresh, "charts/redis-cache/0.3.2/Chart.yaml")); err != nil {
		t.Errorf("0.3.2 not vendored: %v", err)
	}
	if _, stderr, code := runCLI(t, "render", "--repo", fresh, "--registry-username", reg.Username); code != ExitError || !strings.Contains(stderr, "--registry-username needs --registry-password-stdin") {
		t.Errorf("--registry-username alone: exit %d\n%s", code, stderr)
	}
}
