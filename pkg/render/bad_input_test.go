package render

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/test/treefile"
)

// billionLaughs is the classic alias bomb: 9 levels of 9 aliases.
const billionLaughs = `apiVersion: example.com/v1
kind: Laugh
metadata:
  name: lol
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

// smallBomb expands to ~340,000 nodes, 97% of them through aliases: below
// the alias limit of Helm's YAML library (so Helm passes it through), above
// the renderer's (10 times the document's own ~5,000 nodes).
var smallBomb = "pad: [" + strings.Repeat("0,", 5000) + "0]\n" + `apiVersion: example.com/v1
kind: Laugh
metadata:
  name: lol
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e]
`

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n"

const chartYAML = "apiVersion: v2\nname: bad\nversion: 0.1.0\n"

// spinForever loops for days without allocating (templates range over an
// int since Go 1.24; Sprig's until would allocate the whole list), so only
// the time bound can stop it, however fast or busy the machine is.
const spinForever = "{{- range 1000000 }}{{ range 1000000 }}{{ end }}{{ end }}\n"

// growSteadily allocates about 100 bytes per step for ten million steps and
// never frees them: the memory bound trips long before the address-space
// backstop or a generous time bound, on any machine.
const growSteadily = "{{- $d := dict }}{{ range $i := 10000000 }}{{ $_ := set $d (toString $i) \"0123456789abcdef0123456789abcdef\" }}{{ end }}\n"

func kustomization(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func TestBadInput(t *testing.T) {
	type tc struct {
		name  string
		files map[string]string
		// links maps a link (repo-relative) to its target; "{outside}" in a
		// target is a directory next to the repo, outside it.
		links  map[string]string
		setup  func(t *testing.T, root string)
		unit   slice.Unit
		opts   Options
		class  error
		msg    []string // substrings the message must contain
		notMsg []string // substrings it must not contain
	}
	kunit := unitAt("app", slice.UnitKustomize, "app")
	hunit := func(values string) slice.Unit {
		u := unitAt("app", slice.UnitHelm, "app")
		u.Namespace = "apps"
		u.Helm = &slice.HelmRelease{Chart: "chart", ReleaseName: "app", Values: values}
		return u
	}
	tests := []tc{
		{
			name:  "path traversal in resources",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources:", "- ../../etc/passwd")},
			unit:  kunit, class: ErrPathEscape,
			msg: []string{"app/kustomization.yaml", "../../etc/passwd"},
		},
		{
			name:  "path traversal from a deep unit",
			files: map[string]string{"rendered/ab/c1/app/kustomization.yaml": kustomization("resources:", "- ../../../../../../../../etc/passwd")},
			unit:  unitAt("app", slice.UnitKustomize, "rendered/ab/c1/app"), class: ErrPathEscape,
			msg: []string{"rendered/ab/c1/app/kustomization.yaml", "etc/passwd"},
		},
		{
			name: "path traversal in a patch",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [cm.yaml]", "patches:", "- path: ../../secrets/patch.yaml"),
				"app/cm.yaml": configMap},
			unit: kunit, class: ErrPathEscape,
			msg: []string{"app/kustomization.yaml", "patches.path"},
		},
		{
			name:  "absolute path in resources",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [/etc/passwd]")},
			unit:  kunit, class: ErrPathEscape,
			msg: []string{"app/kustomization.yaml", "/etc/passwd"},
		},
		{
			name:  "unit path outside the repo",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [cm.yaml]")},
			unit:  unitAt("app", slice.UnitKustomize, "../app"), class: ErrPathEscape,
			msg: []string{"../app"},
		},
		{
			name:  "symlink resource to an absolute path",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [passwd.yaml]")},
			links: map[string]string{"app/passwd.yaml": "/etc/passwd"},
			unit:  kunit, class: ErrSymlinkEscape,
			msg: []string{"app/passwd.yaml", "/etc/passwd"},
		},
		{
			name:  "symlinked base outside the repo",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [base]")},
			links: map[string]string{"app/base": "../../outside"},
			setup: func(t *testing.T, root string) {
				treefile.WriteFile(t, filepath.Join(root, "../outside/kustomization.yaml"), "resources: [cm.yaml]\n")
				treefile.WriteFile(t, filepath.Join(root, "../outside/cm.yaml"), configMap)
			},
			unit: kunit, class: ErrSymlinkEscape,
			msg: []string{"app/base", "../../outside"},
		},
		{
			name:  "symlink escaping through a linked directory",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [dir/secret.yaml]"), "other/x": ""},
			links: map[string]string{"app/dir": "../other", "other/secret.yaml": "../../outside.yaml"},
			setup: func(t *testing.T, root string) {
				treefile.WriteFile(t, filepath.Join(root, "../outside.yaml"), configMap)
			},
			unit: kunit, class: ErrSymlinkEscape,
			msg: []string{"secret.yaml"},
		},
		{
			name:  "symlinked chart file outside the repo",
			files: map[string]string{"chart/Chart.yaml": chartYAML, "chart/templates/cm.yaml": configMap, "app/values.yaml": "{}\n"},
			links: map[string]string{"chart/templates/evil.yaml": "../../../outside.yaml"},
			setup: func(t *testing.T, root string) {
				treefile.WriteFile(t, filepath.Join(root, "../outside.yaml"), configMap)
			},
			unit: hunit("app/values.yaml"), class: ErrSymlinkEscape,
			msg: []string{"chart/templates/evil.yaml"},
		},
		{
			name:  "symlinked values outside the repo",
			files: map[string]string{"chart/Chart.yaml": chartYAML, "chart/templates/cm.yaml": configMap},
			links: map[string]string{"app/values.yaml": "/etc/hostname"},
			unit:  hunit("app/values.yaml"), class: ErrSymlinkEscape,
			msg: []string{"app/values.yaml"},
		},
		{
			name:  "yaml bomb in a manifest",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [cm.yaml, bomb.yaml]"), "app/cm.yaml": configMap, "app/bomb.yaml": billionLaughs},
			unit:  kunit, class: ErrYAMLBomb,
			msg: []string{"app/bomb.yaml"},
		},
		{
			name:  "yaml bomb in helm values",
			files: map[string]string{"chart/Chart.yaml": chartYAML, "chart/templates/cm.yaml": configMap, "app/values.yaml": billionLaughs},
			unit:  hunit("app/values.yaml"), class: ErrYAMLBomb,
			msg: []string{"app/values.yaml"},
		},
		{
			name: "yaml bomb produced by a template",
			// The leading template comment keeps the source from parsing as
			// YAML; the bomb only exists in the output.
			files: map[string]string{"chart/Chart.yaml": chartYAML, "chart/templates/bomb.yaml": "{{- /* rendered */ -}}\n" + smallBomb},
			unit:  hunit(""), class: ErrYAMLBomb,
			msg: []string{"app/" + slice.HelmOutputFile},
		},
		{
			name:  "yaml bomb in a chart file",
			files: map[string]string{"chart/Chart.yaml": chartYAML, "chart/templates/bomb.yaml": billionLaughs},
			unit:  hunit(""), class: ErrYAMLBomb,
			msg: []string{"chart/templates/bomb.yaml"},
		},
		{
			name:  "50 MB manifest",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [huge.yaml]")},
			setup: func(t *testing.T, root string) {
				f, err := os.Create(filepath.Join(root, "app/huge.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				f.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: huge\ndata:\n  blob: \"")
				chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
				for range 50 {
					if _, err := f.Write(chunk); err != nil {
						t.Fatal(err)
					}
				}
				f.WriteString("\"\n")
			},
			unit: kunit, class: ErrTooLarge,
			msg: []string{"app/huge.yaml", "limit is 4194304"},
		},
		{
			name:  "too many objects",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [a.yaml]"), "app/a.yaml": configMap + "---\n" + strings.ReplaceAll(configMap, "ok", "ok2")},
			unit:  kunit, opts: Options{Limits: Limits{MaxObjects: 1}}, class: ErrTooLarge,
			msg: []string{"2 objects, the limit is 1"},
		},
		{
			// One test per bound: this template never allocates, so only
			// the time bound can stop it.
			name: "helm template that loops",
			files: map[string]string{"chart/Chart.yaml": chartYAML,
				"chart/templates/loop.yaml": spinForever + configMap},
			unit: hunit(""), opts: Options{Limits: Limits{Timeout: 2 * time.Second}}, class: ErrTimeout,
			msg: []string{"chart", "timed out"},
		},
		{
			// ...and this one grows steadily, with a time bound far beyond
			// what reaching 256 MiB takes on any machine.
			name: "helm template that eats memory",
			files: map[string]string{"chart/Chart.yaml": chartYAML,
				"chart/templates/grow.yaml": growSteadily},
			unit: hunit(""), opts: Options{Limits: Limits{MaxHelmMemory: 256 << 20, Timeout: 10 * time.Minute}}, class: ErrTooLarge,
			msg: []string{"chart", "256 MiB"},
		},
		{
			name:  "helm template fails",
			files: map[string]string{"chart/Chart.yaml": chartYAML, "chart/templates/cm.yaml": "{{ required \"value x is required\" .Values.x }}\n"},
			unit:  hunit(""), class: ErrHelm,
			msg: []string{"chart", "value x is required"},
		},
		{
			name: "object with no kind",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [objects.yaml]"),
				"app/objects.yaml": configMap + "---\napiVersion: v1\nmetadata:\n  name: nokind\n"},
			unit: kunit, class: ErrInvalidObject,
			msg: []string{"app/objects.yaml", "object 2 has no kind"},
		},
		{
			name: "object with no name",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [objects.yaml]"),
				"app/objects.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: {a: b}\n"},
			unit: kunit, class: ErrInvalidObject,
			msg: []string{"app/objects.yaml", "object 1 (ConfigMap) has no metadata.name"},
		},
		{
			name: "object with generateName only",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [objects.yaml]"),
				"app/objects.yaml": configMap + "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n"},
			unit: kunit, class: ErrInvalidObject,
			msg: []string{"app/objects.yaml", "object 2 (Job generateName migrate-) has generateName but no metadata.name"},
		},
		{
			name: "helm hook with generateName only",
			files: map[string]string{"chart/Chart.yaml": chartYAML, "chart/templates/cm.yaml": configMap,
				"chart/templates/job.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: {{ .Release.Name }}-migrate-\n  annotations:\n    helm.sh/hook: pre-install\n"},
			unit: hunit(""), class: ErrInvalidObject,
			msg: []string{"bad/templates/job.yaml", "(Job generateName app-migrate-) has generateName but no metadata.name"},
		},
		{
			name: "unknown hook delete policy",
			files: map[string]string{"chart/Chart.yaml": chartYAML, "chart/templates/cm.yaml": configMap,
				"chart/templates/job.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    helm.sh/hook: pre-install\n    helm.sh/hook-delete-policy: before-hook-creation,sometimes\n"},
			unit: hunit(""), class: ErrInvalidObject,
			msg: []string{"Job apps/migrate", `unknown helm.sh/hook-delete-policy "sometimes"`},
		},
		{
			name: "object with no apiVersion",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [objects.yaml]"),
				"app/objects.yaml": "kind: ConfigMap\nmetadata:\n  name: noversion\n"},
			unit: kunit, class: ErrInvalidObject,
			msg: []string{"app/objects.yaml", "has no apiVersion"},
		},
		{
			name:  "template output with no kind",
			files: map[string]string{"chart/Chart.yaml": chartYAML, "chart/templates/cm.yaml": configMap, "chart/templates/bad.yaml": "apiVersion: v1\nmetadata:\n  name: nokind\n"},
			unit:  hunit(""), class: ErrInvalidObject,
			msg: []string{"bad/templates/bad.yaml", "has no kind"},
		},
		{
			name: "duplicate objects",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [objects.yaml]"),
				"app/objects.yaml": configMap + "---\n" + configMap},
			unit: kunit, class: ErrInvalidObject,
			msg: []string{"app/objects.yaml", "duplicates"},
		},
		{
			name:  "remote base URL",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources:", "- https://github.com/kubernetes-sigs/kustomize//examples/multibases?ref=v1.0.6")},
			unit:  kunit, class: ErrRemoteBase,
			msg: []string{"app/kustomization.yaml", "is a URL"},
		},
		{
			name:  "remote base github shorthand",
			files: map[string]string{"app/kustomization.yaml": kustomization("bases:", "- github.com/org/repo/deploy?ref=main")},
			unit:  kunit, class: ErrRemoteBase,
			msg: []string{"app/kustomization.yaml"},
		},
		{
			name: "remote base scp-style in a nested base",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [../base]"),
				"base/kustomization.yaml": kustomization("resources:", "- git@github.com:org/repo.git//deploy")},
			unit: kunit, class: ErrRemoteBase,
			msg: []string{"base/kustomization.yaml"},
		},
		{
			name: "remote patch file",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [cm.yaml]", "patches:", "- path: https://example.com/patch.yaml"),
				"app/cm.yaml": configMap},
			unit: kunit, class: ErrRemoteBase,
			msg: []string{"app/kustomization.yaml", "patches.path"},
		},
		{
			name: "exec plugin",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [cm.yaml]", "transformers: [plugin.yaml]"),
				"app/cm.yaml":     configMap,
				"app/plugin.yaml": "apiVersion: someteam.example.com/v1\nkind: SedTransformer\nmetadata:\n  name: sed\nargs: ['s/a/b/']\n"},
			unit: kunit, class: ErrPluginsDisabled,
			msg: []string{"app/plugin.yaml", "SedTransformer"},
		},
		{
			name: "function plugin inline",
			files: map[string]string{"app/kustomization.yaml": kustomization("resources: [cm.yaml]", "generators:",
				"- |-", "  apiVersion: example.com/v1", "  kind: Gen", "  metadata:", "    name: g",
				"    annotations:", "      config.kubernetes.io/function: |", "        container:", "          image: evil"),
				"app/cm.yaml": configMap},
			unit: kunit, class: ErrPluginsDisabled,
			msg: []string{"app/kustomization.yaml", "Gen"},
		},
		{
			name:  "helmCharts generator",
			files: map[string]string{"app/kustomization.yaml": kustomization("helmCharts:", "- name: minecraft", "  repo: https://itzg.github.io/minecraft-server-charts", "  version: 3.1.3")},
			unit:  kunit, class: ErrPluginsDisabled,
			msg: []string{"app/kustomization.yaml", "helmCharts"},
		},
		{
			name: "helm inflator as a builtin generator",
			files: map[string]string{"app/kustomization.yaml": kustomization("generators: [helm.yaml]"),
				"app/helm.yaml": "apiVersion: builtin\nkind: HelmChartInflationGenerator\nmetadata:\n  name: h\nname: minecraft\n"},
			unit: kunit, class: ErrPluginsDisabled,
			msg: []string{"app/helm.yaml"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := writeTree(t, tc.files)
			if err := os.MkdirAll(filepath.Join(root, "app"), 0o755); err != nil {
				t.Fatal(err)
			}
			for link, target := range tc.links {
				symlink(t, target, filepath.Join(root, filepath.FromSlash(link)))
			}
			if tc.setup != nil {
				tc.setup(t, root)
			}
			start := time.Now()
			res, err := Unit(context.Background(), root, tc.unit, tc.opts)
			elapsed := time.Since(start) // logged only: a slow machine may take longer
			if err == nil {
				y, _ := res.YAML()
				t.Fatalf("rendered without error:\n%s", y)
			}
			if !errors.Is(err, tc.class) {
				t.Fatalf("error %q is not %v", err, tc.class)
			}
			var re *Error
			if !errors.As(err, &re) || re.Unit != tc.unit.Name {
				t.Errorf("error %q is not a *render.Error for unit %s", err, tc.unit.Name)
			}
			for _, want := range tc.msg {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			for _, not := range tc.notMsg {
				if strings.Contains(err.Error(), not) {
					t.Errorf("error %q contains %q", err, not)
				}
			}
			t.Logf("%v (%v)", err, elapsed.Round(time.Millisecond))
		})
	}
}

// TestWorkerRecoversAfterKill: a render after a killed worker gets a fresh one.
func TestWorkerRecoversAfterKill(t *testing.T) {
	root := writeTree(t, map[string]string{
		"chart/Chart.yaml":          chartYAML,
		"chart/templates/loop.yaml": spinForever,
		"good/Chart.yaml":           strings.ReplaceAll(chartYAML, "bad", "good"),
		"good/templates/cm.yaml":    configMap,
		"app/values.yaml":           "{}\n",
	})
	u := unitAt("app", slice.UnitHelm, "app")
	u.Helm = &slice.HelmRelease{Chart: "chart", Values: "app/values.yaml"}
	if _, err := Unit(context.Background(), root, u, Options{Limits: Limits{Timeout: time.Second}}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("loop: %v, want ErrTimeout", err)
	}
	u.Helm.Chart = "good"
	res, err := Unit(context.Background(), root, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	find(t, res.Objects, "ConfigMap", "ok")
}

// TestCallerDeadline: the caller's deadline bounds the render too, and a
// canceled context is not reported as a timeout.
func TestCallerDeadline(t *testing.T) {
	root := writeTree(t, map[string]string{
		"chart/Chart.yaml":          chartYAML,
		"chart/templates/loop.yaml": spinForever,
		"app/kustomization.yaml":    "resources: [cm.yaml]\n",
		"app/cm.yaml":               configMap,
	})
	u := unitAt("app", slice.UnitHelm, "app")
	u.Helm = &slice.HelmRelease{Chart: "chart"}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := Unit(ctx, root, u, Options{})
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTimeout and context.DeadlineExceeded", err)
	}

	// A deadline that passes during a kustomize build stops it at its next read.
	_, err = Unit(context.Background(), root, unitAt("app", slice.UnitKustomize, "app"), Options{Limits: Limits{Timeout: time.Nanosecond}})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("kustomize with a 1ns limit: err = %v, want ErrTimeout", err)
	}

	canceled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	_, err = Unit(canceled, root, unitAt("app", slice.UnitKustomize, "app"), Options{})
	if err == nil || errors.Is(err, ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: err = %v, want context.Canceled and not ErrTimeout", err)
	}
}

// TestErrorsCarryNoSecretData: a failing patch on a Secret must not quote
// the Secret's data.
func TestErrorsCarryNoSecretData(t *testing.T) {
	const secretValue = "c3VwZXItc2VjcmV0LXBhc3N3b3JkLXZhbHVlLTEyMzQ1Ng=="
	root := writeTree(t, map[string]string{
		"app/kustomization.yaml": kustomization("resources: [secret.yaml]", "patches:", "- target: {kind: Secret}", "  patch: |-",
			"    - op: test", "      path: /data/password", "      value: wrong"),
		"app/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  annotations:\n    note: " + secretValue + "\ndata:\n  password: " + secretValue + "\n",
	})
	_, err := Unit(context.Background(), root, unitAt("app", slice.UnitKustomize, "app"), Options{})
	if !errors.Is(err, ErrKustomize) {
		t.Fatalf("err = %v, want ErrKustomize", err)
	}
	if strings.Contains(err.Error(), secretValue) || strings.Contains(err.Error(), "super-secret") {
		t.Errorf("error quotes Secret data: %v", err)
	}
	t.Log(err)
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain message", "plain message"},
		{"first line: \napiVersion: v1\ndata:\n  password: x", "first line […]"},
		{"missing kind in object {{v1 } {{a } map[note:s3cr3t] map[]}}: bad", "missing kind in object {…}: bad"},
		{"got map[data:map[password:aHVudGVyMg==]] here", "got map[…] here"},
		{`patch {"data":{"password":"aHVudGVyMg=="}} failed`, "patch {…} failed"},
		{"token ZXlKaGJHY2lPaUpTVXpJMU5pSXNJbXRwWkNJNklpSjkuZXlKcGMzTWlPaUpyZFdKbGNtNWxkR1Z6 leaked", "token … leaked"},
		// A JSON patch path is kept: it is what the reader must fix.
		{"doc is missing path: /spec/template/spec/containers/0/resources/limits/memory: missing value",
			"doc is missing path: /spec/template/spec/containers/0/resources/limits/memory: missing value"},
		{"key aGVsbG8vd29ybGQvdGhpcy9pcy9ub3QvYS9wYXRo/aGVsbG8/d29ybGQ leaked", "key … leaked"},
		{"key QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo/YWJj/ZGVm leaked", "key … leaked"},
		// An age recipient is a public key: a decryption error names it.
		{"encrypted for age1jse6xnf8jpun5u7pm3l77ms0dz0mhdksf3nthp4n85mg68mxlfks6jy8pc, none is ours",
			"encrypted for age1jse6xnf8jpun5u7pm3l77ms0dz0mhdksf3nthp4n85mg68mxlfks6jy8pc, none is ours"},
		{"age1QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0YWJjZGVm leaked", "… leaked"},
	}
	for _, tc := range tests {
		if got := sanitize(tc.in); got != tc.want {
			t.Errorf("sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestJSONPatchPathInError: a JSON6902 operation that fails names its path
// rather than eliding it like encoded data.
func TestJSONPatchPathInError(t *testing.T) {
	const opPath = "/spec/template/spec/containers/0/resources/limits/memory"
	root := writeTree(t, map[string]string{
		"app/kustomization.yaml": kustomization("resources: [deploy.yaml]", "patches:", "- target: {kind: Deployment}", "  patch: |-",
			"    - op: replace", "      path: "+opPath, "      value: 1Gi"),
		"app/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx\n",
	})
	_, err := Unit(context.Background(), root, unitAt("app", slice.UnitKustomize, "app"), Options{})
	if !errors.Is(err, ErrKustomize) {
		t.Fatalf("err = %v, want ErrKustomize", err)
	}
	if !strings.Contains(err.Error(), opPath) {
		t.Errorf("error does not name the path %s: %v", opPath, err)
	}
}
