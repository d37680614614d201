package cmd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-gitops/flotilla/pkg/render"
	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/gitserver"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// gitSourceFleet is a fleet repo with one application whose source is
// deploy/ of the upstream repo "podinfo" on a real Git server.
func gitSourceFleet(t *testing.T) (repo string, srv *gitserver.Server, creds string) {
	t.Helper()
	srv = gitserver.Start(t, gitserver.ForgeConfig())
	up := t.TempDir()
	treefile.Write(t, up, map[string]string{
		"deploy/kustomization.yaml": "resources: [cm.yaml]\n",
		"deploy/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo\ndata:\n  version: one\n",
	})
	srv.MustCreateRepo(t, "podinfo", up)
	repo = t.TempDir()
	treefile.Write(t, repo, map[string]string{
		"clusters/member1.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Cluster\nmetadata:\n  name: member1\nspec: {}\n",
		"fleets/dev.yaml":       "apiVersion: flotilla.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: dev\nspec:\n  clusters: [member1]\n",
		"apps/podinfo/app.yaml": "apiVersion: flotilla.dev/v1alpha1\nkind: Application\nmetadata:\n  name: podinfo\nspec:\n  namespace: web\n" +
			"  source:\n    git:\n      url: " + srv.URL("podinfo") + "\n      ref:\n        branch: main\n      path: deploy\n" +
			"    kustomize:\n      path: .\n  syncPolicies:\n    - destination:\n        fleet: dev\n",
	})
	creds = t.TempDir()
	treefile.Write(t, creds, map[string]string{"username": gitserver.Maintainer, "password": srv.Password(gitserver.Maintainer)})
	return repo, srv, creds
}

// podinfoVersion renders member1's podinfo unit with render.Unit, as the
// agent does from its checkout, and returns the ConfigMap's version.
func podinfoVersion(t *testing.T, repo string) string {
	t.Helper()
	s, err := slice.Read(repo, "member1")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range s.Units {
		if u.Name != "podinfo" {
			continue
		}
		res, err := render.Unit(context.Background(), repo, u, render.Options{})
		if err != nil {
			t.Fatalf("render podinfo: %v", err)
		}
		for _, o := range res.Objects {
			if o.GetKind() == "ConfigMap" {
				if o.GetNamespace() != "web" {
					t.Errorf("namespace = %q", o.GetNamespace())
				}
				v, _ := o.Object["data"].(map[string]any)["version"].(string)
				return v
			}
		}
	}
	t.Fatalf("member1 has no podinfo ConfigMap: %+v", s.Units)
	return ""
}

func TestRenderVendorsAGitSource(t *testing.T) {
	repo, srv, creds := gitSourceFleet(t)
	first := srv.Head("podinfo", "main")

	// Without credentials the forge refuses, and the error says which
	// application and which remote.
	_, stderr, code := runCLI(t, "render", "--repo", repo)
	if code != ExitError || !strings.Contains(stderr, "apps/podinfo/app.yaml:8: spec.source.git: application podinfo: ls-remote "+srv.URL("podinfo")) || !strings.Contains(stderr, "authentication") {
		t.Fatalf("render without credentials: exit %d\n%s", code, stderr)
	}

	stdout, stderr, code := runCLI(t, "render", "--repo", repo, "--source-credentials-dir", creds)
	if code != ExitOK {
		t.Fatalf("render: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "source podinfo: vendored "+first[:12]) {
		t.Errorf("render did not report the vendored source:\n%s", stdout)
	}
	lock, err := os.ReadFile(filepath.Join(repo, "sources/podinfo.lock.yaml"))
	if err != nil || !strings.Contains(string(lock), "commit: "+first) {
		t.Fatalf("lock: %s, %v", lock, err)
	}
	if strings.Contains(string(lock), srv.Password(gitserver.Maintainer)) {
		t.Fatal("the password reached the lock")
	}
	if v := podinfoVersion(t, repo); v != "one" {
		t.Fatalf("rendered version %q, want one", v)
	}
	if stdout, stderr, code := runCLI(t, "render", "--check", "--repo", repo); code != ExitOK {
		t.Fatalf("check after render: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// A hand edit of the vendored copy fails --check, naming the
	// application and the directory; render restores it.
	cm := filepath.Join(repo, "sources/podinfo/cm.yaml")
	editFile(t, cm, "version: one", "version: hacked")
	stdout, _, code = runCLI(t, "render", "--check", "--repo", repo)
	if code != ExitChanges || !strings.Contains(stdout, "application podinfo: sources/podinfo/: no longer matches") || !strings.Contains(stdout, first) {
		t.Fatalf("check of an edited copy: exit %d\n%s", code, stdout)
	}
	if _, _, code := runCLI(t, "render", "--repo", repo, "--source-credentials-dir", creds); code != ExitOK {
		t.Fatalf("render of an edited copy: exit %d", code)
	}
	if v := podinfoVersion(t, repo); v != "one" {
		t.Fatalf("after restoring, version %q", v)
	}

	// The branch moves upstream: nothing changes until --update-sources.
	srv.Commit(t, "podinfo", gitserver.Maintainer, map[string]string{"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo\ndata:\n  version: two\n"}, nil, "two")
	second := srv.Head("podinfo", "main")
	stdout, stderr, code = runCLI(t, "render", "--repo", repo)
	if code != ExitOK || !strings.Contains(stdout, "nothing changed") {
		t.Fatalf("render after the branch moved: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if stdout, _, code := runCLI(t, "render", "--check", "--repo", repo); code != ExitOK {
		t.Fatalf("check after the branch moved: exit %d\n%s", code, stdout)
	}
	sliceBefore, _ := os.ReadFile(filepath.Join(repo, slice.SlicePath("member1")))
	stdout, stderr, code = runCLI(t, "render", "--repo", repo, "--update-sources", "--source-credentials-dir", creds)
	if code != ExitOK || !strings.Contains(stdout, "source podinfo: updated "+second[:12]) {
		t.Fatalf("render --update-sources: exit %d\n%s\n%s", code, stdout, stderr)
	}
	sliceAfter, _ := os.ReadFile(filepath.Join(repo, slice.SlicePath("member1")))
	if string(sliceAfter) == string(sliceBefore) {
		t.Error("the slice's hash did not change with the source")
	}
	if v := podinfoVersion(t, repo); v != "two" {
		t.Fatalf("after --update-sources, version %q", v)
	}

	stdout, _, code = runCLI(t, "render", "--repo", repo, "-o", "json")
	var sum renderSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || code != ExitOK {
		t.Fatalf("render -o json: exit %d, %v\n%s", code, err, stdout)
	}
	want := sourceSummary{App: "podinfo", URL: srv.URL("podinfo"), Ref: "branch main", Path: "deploy", Commit: second, Dir: "sources/podinfo", Action: "unchanged"}
	if len(sum.Sources) != 1 || sum.Sources[0] != want {
		t.Errorf("json sources = %+v, want %+v", sum.Sources, want)
	}

	// The application asks for a tag without a render: --check names the lock.
	editFile(t, filepath.Join(repo, "apps/podinfo/app.yaml"), "branch: main", "tag: v1")
	stdout, _, code = runCLI(t, "render", "--check", "--repo", repo)
	if code != ExitChanges || !strings.Contains(stdout, "sources/podinfo.lock.yaml: pins") {
		t.Fatalf("check of a changed ref: exit %d\n%s", code, stdout)
	}
	stdout, _, code = runCLI(t, "render", "--check", "--repo", repo, "-o", "json")
	sum = renderSummary{}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || code != ExitChanges || len(sum.Errors) != 1 || sum.Errors[0].File != "sources/podinfo.lock.yaml" {
		t.Fatalf("check -o json of a changed ref: exit %d, %v\n%s", code, err, stdout)
	}
	if _, _, code := runCLI(t, "render", "--check", "--update-sources", "--repo", repo); code != ExitError {
		t.Fatalf("--check --update-sources: exit %d, want %d", code, ExitError)
	}
}

// TestPlanShowsAnUpdatedGitSource: a pull request made with
// --update-sources shows the source's changed objects in flotilla plan,
// which compiles both sides from their pinned copies without the network.
func TestPlanShowsAnUpdatedGitSource(t *testing.T) {
	repo, srv, creds := gitSourceFleet(t)
	if _, stderr, code := runCLI(t, "render", "--repo", repo, "--source-credentials-dir", creds); code != ExitOK {
		t.Fatalf("render: exit %d\n%s", code, stderr)
	}
	planGit(t, repo, "init", "-q", "-b", "main")
	planGit(t, repo, "add", "-A")
	planGit(t, repo, "commit", "-q", "-m", "podinfo from Git")
	planGit(t, repo, "checkout", "-q", "-b", "update-sources")
	srv.Commit(t, "podinfo", gitserver.Maintainer, map[string]string{"deploy/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: podinfo\ndata:\n  version: two\n"}, nil, "two")
	if _, stderr, code := runCLI(t, "render", "--repo", repo, "--update-sources", "--source-credentials-dir", creds); code != ExitOK {
		t.Fatalf("render --update-sources: exit %d\n%s", code, stderr)
	}
	planGit(t, repo, "commit", "-q", "-am", "update sources")

	before := srv.Stats("podinfo")
	out, stderr, code := planCLI(t, "plan", "--repo", repo, "--base", "main", "--head", "update-sources", "--no-color")
	if code != ExitChanges || !strings.Contains(out, "ConfigMap") || !strings.Contains(out, "+  version: two") {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, stderr)
	}
	if d := srv.Stats("podinfo").Sub(before); d.InfoRefs+d.LsRefs+d.UploadPacks != 0 {
		t.Errorf("plan used the network: %+v", d)
	}
}
