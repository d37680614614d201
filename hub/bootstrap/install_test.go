package bootstrap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/render/sopsdecrypt"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/golden"
)

func validOptions() InstallOptions {
	return InstallOptions{Cluster: "member3", RepoURL: "https://git.example.com/platform/fleet.git"}
}

func TestInstallOptionsValidation(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(*InstallOptions)
		wantOK bool
	}{
		{"defaults", func(*InstallOptions) {}, true},
		{"ssh with user", func(o *InstallOptions) { o.RepoURL = "ssh://git@git.example.com/fleet.git" }, true},
		{"http", func(o *InstallOptions) { o.RepoURL = "http://127.0.0.1:8080/fleet.git" }, true},
		{"no cluster", func(o *InstallOptions) { o.Cluster = "" }, false},
		{"cluster not a DNS label", func(o *InstallOptions) { o.Cluster = "Edge_1" }, false},
		{"no repo URL", func(o *InstallOptions) { o.RepoURL = "" }, false},
		{"scp-like URL", func(o *InstallOptions) { o.RepoURL = "git@github.com:org/fleet.git" }, false},
		{"file URL", func(o *InstallOptions) { o.RepoURL = "file:///srv/fleet.git" }, false},
		{"password in URL", func(o *InstallOptions) { o.RepoURL = "https://git:s3cret@git.example.com/fleet.git" }, false},
		{"token as user in URL", func(o *InstallOptions) { o.RepoURL = "https://ghp_abc@github.com/org/fleet.git" }, false},
		{"ssh password", func(o *InstallOptions) { o.RepoURL = "ssh://git:pw@git.example.com/fleet.git" }, false},
		{"branch with dots", func(o *InstallOptions) { o.Branch = "release/1.2" }, true},
		{"branch ..", func(o *InstallOptions) { o.Branch = "a..b" }, false},
		{"branch space", func(o *InstallOptions) { o.Branch = "my branch" }, false},
		{"branch .lock", func(o *InstallOptions) { o.Branch = "main.lock" }, false},
		{"branch leading dash", func(o *InstallOptions) { o.Branch = "-main" }, false},
		{"negative interval", func(o *InstallOptions) { o.Interval = -time.Second }, false},
		{"slice transport", func(o *InstallOptions) { o.GitTransport = GitTransportSlice }, true},
		{"branch transport", func(o *InstallOptions) { o.GitTransport = GitTransportBranch }, true},
		{"unknown transport", func(o *InstallOptions) { o.GitTransport = "tree" }, false},
		{"namespace", func(o *InstallOptions) { o.Namespace = "flotilla" }, true},
		{"bad namespace", func(o *InstallOptions) { o.Namespace = "Flotilla" }, false},
		{"secret", func(o *InstallOptions) { o.CredentialsSecret = "fleet.deploy-key" }, true},
		{"bad secret", func(o *InstallOptions) { o.CredentialsSecret = "a/b" }, false},
		{"image with digest", func(o *InstallOptions) { o.Image = "registry.local:5000/agent@sha256:0123" }, true},
		{"image without tag", func(o *InstallOptions) { o.Image = "registry.local:5000/agent" }, false},
		{"image empty tag", func(o *InstallOptions) { o.Image = "agent:" }, false},
		{"image with space", func(o *InstallOptions) { o.Image = "agent :v1" }, false},
		{"sops age key", func(o *InstallOptions) {
			o.SOPSAgeKey, _, _ = sopsdecrypt.GenerateKey()
		}, true},
		// Not quoted back: it might be a real key with a typo.
		{"bad sops age key", func(o *InstallOptions) { o.SOPSAgeKey = []byte("AGE-SECRET-KEY-1s3cret") }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.edit(&o)
			_, err := o.Settings()
			if tc.wantOK && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.wantOK && !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("got %v, want ErrInvalidOption", err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error repeats a password: %v", err)
			}
		})
	}
}

func TestRepoURLFromRemote(t *testing.T) {
	cases := map[string]string{
		"git@github.com:org/fleet.git":             "ssh://git@github.com/org/fleet.git",
		"github.com:/org/fleet.git":                "ssh://github.com/org/fleet.git",
		"https://github.com/org/fleet.git":         "https://github.com/org/fleet.git",
		"ssh://git@git.example.com:2222/fleet.git": "ssh://git@git.example.com:2222/fleet.git",
		"/srv/git/fleet.git":                       "/srv/git/fleet.git",
		"./fleet":                                  "./fleet",
		"dir/with:colon":                           "dir/with:colon",
	}
	for in, want := range cases {
		if got := RepoURLFromRemote(in); got != want {
			t.Errorf("RepoURLFromRemote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseImage(t *testing.T) {
	cases := []struct{ in, name, tag, digest string }{
		{"ghcr.io/flotilla-gitops/flotilla-agent:v1.2.3", "ghcr.io/flotilla-gitops/flotilla-agent", "v1.2.3", ""},
		{"localhost:5000/agent:dev", "localhost:5000/agent", "dev", ""},
		{"agent@sha256:abc", "agent", "", "sha256:abc"},
		{"reg:5000/a/b:t@sha256:abc", "reg:5000/a/b", "t", "sha256:abc"},
	}
	for _, tc := range cases {
		r, err := parseImage(tc.in)
		if err != nil || r != (imageRef{tc.name, tc.tag, tc.digest}) {
			t.Errorf("parseImage(%q) = %+v, %v", tc.in, r, err)
		}
	}
}

func FuzzParseImage(f *testing.F) {
	for _, s := range []string{"a:b", "reg:5000/a/b:t@sha256:abc", "@", ":", "a@b", "/:x", "a/:b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseImage(s)
		if err != nil {
			return
		}
		back := r.name
		if r.tag != "" {
			back += ":" + r.tag
		}
		if r.digest != "" {
			back += "@" + r.digest
		}
		if back != s || r.name == "" || (r.tag == "" && r.digest == "") {
			t.Fatalf("parseImage(%q) = %+v", s, r)
		}
	})
}

func TestDefaultImage(t *testing.T) {
	if got, want := DefaultImage(), ImageRepository+":"+ManifestsImageTag; got != want {
		t.Errorf("a development build installs %s, want %s", got, want)
	}
	for v, ok := range map[string]bool{"v1.2.3": true, "v0.4.0-rc.1": true, "dev": false, "v1.2.3-4-gabcdef-dirty": false, "1.2.3": false} {
		if releaseVersion.MatchString(v) != ok {
			t.Errorf("release version %q: %v", v, !ok)
		}
	}
}

// TestInstallOverlayGolden: the generated overlay files, for an install
// that changes every setting, against testdata/golden/ (go test -update).
func TestInstallOverlayGolden(t *testing.T) {
	o := InstallOptions{
		Cluster: "edge-7", RepoURL: "ssh://git@git.example.com/platform/fleet.git", Branch: "production",
		Interval: 5 * time.Minute, GitTransport: GitTransportSlice, Namespace: "flotilla", CredentialsSecret: "fleet-deploy-key",
		Image: "registry.example.com/mirror/flotilla-agent:v0.2.0",
	}
	files, err := InstallFiles(o)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range files {
		if !strings.HasPrefix(name, BaseDir+"/") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if want := []string{"agent-config.yaml", "git-credentials.yaml", "kustomization.yaml"}; !slices.Equal(names, want) {
		t.Fatalf("overlay files %v, want %v", names, want)
	}
	var got strings.Builder
	for _, name := range names {
		got.WriteString("=== " + name + "\n")
		got.Write(files[name])
	}
	golden.Assert(t, "testdata/golden/overlay-edge-7.txt", got.String())

	base, err := os.ReadFile("../../manifests/base/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(files["base/daemonset.yaml"]) != string(base) {
		t.Error("base/daemonset.yaml is not the embedded manifests/base copy")
	}
}

func objectsByKind(objs []*unstructured.Unstructured) map[string][]*unstructured.Unstructured {
	m := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		m[o.GetKind()] = append(m[o.GetKind()], o)
	}
	return m
}

// TestInstallObjectsWireTheSettings: what a bootstrapped install holds,
// object by object, with a custom namespace and credentials Secret.
func TestInstallObjectsWireTheSettings(t *testing.T) {
	o := validOptions()
	o.Namespace = "fleet-agent"
	o.CredentialsSecret = "fleet-git"
	o.Image = "registry.example.com/flotilla-agent@sha256:0123abcd"
	objs, err := InstallObjects(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	by := objectsByKind(objs)
	if ns := by["Namespace"]; len(ns) != 1 || ns[0].GetName() != "fleet-agent" {
		t.Errorf("namespaces %v", ns)
	}
	for _, obj := range objs {
		if obj.GetKind() != "Namespace" && !strings.HasPrefix(obj.GetKind(), "Cluster") && obj.GetNamespace() != "fleet-agent" {
			t.Errorf("%s %s in namespace %q", obj.GetKind(), obj.GetName(), obj.GetNamespace())
		}
		if subjects, ok, _ := unstructured.NestedSlice(obj.Object, "subjects"); ok {
			for _, s := range subjects {
				if ns := s.(map[string]any)["namespace"]; ns != "fleet-agent" {
					t.Errorf("%s %s binds a subject in %v", obj.GetKind(), obj.GetName(), ns)
				}
			}
		}
	}
	for _, s := range by["Secret"] {
		if s.GetName() == DefaultCredentialsSecret {
			t.Error("the credentials template is installed although the Secret is the user's")
		}
	}
	if len(by["Secret"]) != 2 {
		t.Errorf("%d Secrets, want the 2 key templates", len(by["Secret"]))
	}
	cm := by["ConfigMap"][0]
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	want := map[string]string{
		"FLOTILLA_CLUSTER_NAME": "member3", "FLOTILLA_REPO_URL": o.RepoURL, "FLOTILLA_BRANCH": "main",
		"FLOTILLA_INTERVAL": "1m", "FLOTILLA_LOG_LEVEL": "info", "FLOTILLA_LOG_FORMAT": "json",
	}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("ConfigMap %s = %q, want %q", k, data[k], v)
		}
	}
	if got := cm.GetAnnotations()[StatusRefAnnotation]; got != "refs/heads/flotilla/status/member3" {
		t.Errorf("status ref annotation %q", got)
	}
	ds := by["DaemonSet"][0]
	c0, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	if img := c0[0].(map[string]any)["image"]; img != "registry.example.com/flotilla-agent@sha256:0123abcd" {
		t.Errorf("image %v", img)
	}
	vols, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "volumes")
	found := false
	for _, v := range vols {
		vm := v.(map[string]any)
		if vm["name"] == "git-credentials" {
			found = true
			if name, _, _ := unstructured.NestedString(vm, "secret", "secretName"); name != "fleet-git" {
				t.Errorf("credentials volume mounts %q", name)
			}
		}
	}
	if !found {
		t.Error("no git-credentials volume")
	}

	y, err := InstallYAML(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(y), "\n---\n"); n != len(objs) {
		t.Errorf("YAML stream has %d separators for %d objects", n, len(objs))
	}
}

// TestWriteInstallDir: the written directory builds (with the agent's
// renderer) into exactly InstallObjects; a non-empty directory is refused
// unless forced.
func TestWriteInstallDir(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "install")
	names, err := WriteInstallDir(ctx, dir, validOptions(), false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, "kustomization.yaml") || !slices.Contains(names, "base/kustomization.yaml") {
		t.Errorf("wrote %v", names)
	}
	res, err := render.Unit(ctx, dir, slice.Unit{Name: "x", Kind: slice.UnitKustomize, Path: "."}, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	built, _ := res.YAML()
	objs, err := InstallObjects(ctx, validOptions())
	if err != nil {
		t.Fatal(err)
	}
	want, _ := (&render.Result{Objects: objs}).YAML()
	if string(built) != string(want) {
		t.Error("the written directory does not build into InstallObjects")
	}
	if _, err := WriteInstallDir(ctx, dir, validOptions(), false); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("second write: %v, want ErrNotEmpty", err)
	}
	if _, err := WriteInstallDir(ctx, dir, validOptions(), true); err != nil {
		t.Errorf("forced write: %v", err)
	}
	if _, err := WriteInstallDir(ctx, filepath.Join(t.TempDir(), "x"), InstallOptions{Cluster: "x"}, false); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("invalid options: %v", err)
	}
}

func TestLocalAgentArgs(t *testing.T) {
	o := validOptions()
	o.Interval = 30 * time.Second
	args, err := o.LocalAgentArgs(LocalAgent{Kubeconfig: "/k/member3", CacheDir: "/c/member3", HealthAddr: "127.0.0.1:0", Identity: "demo-member3"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"--leader-elect", "--cache-dir=/c/member3", "--metrics-addr=0", "--health-addr=127.0.0.1:0",
		"--kubeconfig=/k/member3", "--namespace=flotilla-system", "--identity=demo-member3",
		"--cluster-name=member3", "--repo-url=https://git.example.com/platform/fleet.git", "--branch=main", "--interval=30s",
	}
	if !slices.Equal(args, want) {
		t.Errorf("args\n%v\nwant\n%v", args, want)
	}
	if _, err := o.LocalAgentArgs(LocalAgent{CacheDir: "/c"}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("no kubeconfig: %v", err)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second: "30s", 5 * time.Minute: "5m", 90 * time.Second: "1m30s",
		time.Hour: "1h", 2*time.Hour + 30*time.Minute: "2h30m", time.Hour + time.Second: "1h0m1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
