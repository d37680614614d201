package cijob_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/flotilla-gitops/flotilla/test/agentproc"
	"github.com/flotilla-gitops/flotilla/test/cijob"
)

const modulePath = "github.com/flotilla-gitops/flotilla"

// TestTemplateInstallsAsWritten runs the "Install flotilla" step of every
// GitHub workflow of the template as written, `go install` included,
// against a Go module proxy on disk that holds this checkout's HEAD as the
// version the real proxy would give it (a pseudo-version); the module's
// dependencies come from the module cache, also as a file:// proxy. The
// installed `flotilla` must run and be on the job's PATH. Every GitLab job
// installs the same package (its line writes to /usr/local/bin, so it is
// compared, not run).
func TestTemplateInstallsAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the CLI from a module proxy")
	}
	root := agentproc.ModuleRoot()
	version, proxy := moduleProxy(t, root)
	modCache := goEnv(t, "GOMODCACHE")

	template := filepath.Join(root, "fleet-repo-template")
	workflows, err := filepath.Glob(filepath.Join(template, ".github", "workflows", "*.yml"))
	if err != nil || len(workflows) == 0 {
		t.Fatalf("no workflows: %v", err)
	}
	installs := 0
	var installed []string
	for _, wf := range workflows {
		doc, err := cijob.Load(wf)
		if err != nil {
			t.Fatal(err)
		}
		jobs, _ := doc["jobs"].(map[string]any)
		for job := range jobs {
			script, err := cijob.GitHubStep(doc, job, "Install flotilla")
			if err != nil {
				continue
			}
			installs++
			installed = append(installed, installedPackages(script)...)
			t.Run(filepath.Base(wf)+"/"+job, func(t *testing.T) {
				runner := t.TempDir()
				githubPath := filepath.Join(runner, "github_path")
				env := append(os.Environ(), cijob.GitHubEnv(doc)...)
				env = append(env,
					"FLOTILLA_VERSION="+version, // the release the template pins, as this checkout
					"RUNNER_TEMP="+runner, "GITHUB_PATH="+githubPath,
					"GOPROXY=file://"+proxy+",file://"+filepath.Join(modCache, "cache", "download"),
					"GOSUMDB=off", "GOFLAGS=", "GOTOOLCHAIN=local", "GOWORK=off",
				)
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
				defer cancel()
				out, err := cijob.Run(ctx, t.TempDir(), script, env)
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				path, err := os.ReadFile(githubPath)
				if err != nil {
					t.Fatal(err)
				}
				bin := filepath.Join(strings.TrimSpace(string(path)), "flotilla")
				got, err := exec.CommandContext(ctx, bin, "version").CombinedOutput()
				if err != nil || !strings.Contains(string(got), " "+version+" ") {
					t.Fatalf("%s version: %v, want it to say %s:\n%s", bin, err, version, got)
				}
				t.Logf("installed %s: %s", bin, strings.TrimSpace(string(got)))
			})
		}
	}
	if installs == 0 {
		t.Fatal("no workflow has an \"Install flotilla\" step")
	}

	gitlab, _ := filepath.Glob(filepath.Join(template, ".gitlab", "*.yml"))
	gitlab = append(gitlab, filepath.Join(template, ".gitlab-ci.yml"))
	for _, f := range gitlab {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pkgs := installedPackages(string(data))
		if len(pkgs) == 0 {
			t.Errorf("%s installs no flotilla", f)
		}
		for _, p := range pkgs {
			if !slices.Contains(installed, p) {
				t.Errorf("%s installs %s, the GitHub workflows %v", f, p, installed)
			}
		}
	}
}

var goInstallRe = regexp.MustCompile(`go install "?([^"@\s]+)@`)

// installedPackages are the packages a script's `go install` lines name.
func installedPackages(script string) []string {
	var out []string
	for _, m := range goInstallRe.FindAllStringSubmatch(script, -1) {
		out = append(out, m[1])
	}
	return out
}

// moduleProxy writes a Go module proxy (GOPROXY=file://dir) holding this
// checkout's committed HEAD as the module at its pseudo-version, which it
// returns with the directory.
func moduleProxy(t *testing.T, root string) (version, dir string) {
	t.Helper()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	secs, err := strconv.ParseInt(git("log", "-1", "--format=%ct", "HEAD"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	when := time.Unix(secs, 0).UTC()
	version = module.PseudoVersion("v0", "", when, git("rev-parse", "--short=12", "HEAD"))

	dir = t.TempDir()
	at := filepath.Join(dir, filepath.FromSlash(modulePath), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	var zip bytes.Buffer
	if err := modzip.CreateFromVCS(&zip, module.Version{Path: modulePath, Version: version}, root, "HEAD", ""); err != nil {
		t.Fatalf("module zip of HEAD: %v", err)
	}
	goMod := []byte(git("show", "HEAD:go.mod") + "\n")
	info, err := json.Marshal(map[string]any{"Version": version, "Time": when})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"list": []byte(version + "\n"), version + ".info": info, version + ".mod": goMod, version + ".zip": zip.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return version, dir
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
