package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
)

// preflight walks the kustomization graph of a unit before krusty runs, so
// that what krusty must never do is refused up front with an error naming
// the kustomization at fault: clone or download (remote resources), execute
// (exec, Go and KRM-function plugins, the helmCharts generator) or leave
// the repository. krusty then builds through the same confinedFS, which
// enforces confinement and limits on every read regardless.
type preflight struct {
	fs      *confinedFS
	visited map[string]bool
	// resources are the plain resource files of the graph, in discovery
	// order, used to name the file when krusty rejects an object.
	resources []string
	seen      map[string]bool
	// root is the unit directory (symlink-free): the directories its
	// kustomization lists as resources are the application's sources,
	// which, like a Flux Kustomization's path, get Flux's generated
	// kustomization when they have none.
	root string
	// setsSchema: a kustomization of the graph has an `openapi:` field,
	// which changes kustomize's process-wide schema (see schemaGate).
	setsSchema bool
}

func newPreflight(f *confinedFS) *preflight {
	return &preflight{fs: f, visited: map[string]bool{}, seen: map[string]bool{}}
}

// kustomization checks the kustomization in dir (repo-relative). In
// pluginConfigs mode the directory is a generator/transformer/validator
// source, whose resources are plugin configurations. With generate, a
// directory without a kustomization gets Flux's generated one (see
// generateKustomization); else it is an error, as in kustomize.
func (p *preflight) kustomization(dir string, pluginConfigs, generate bool) error {
	realDir, err := p.fs.resolve(dir)
	if err != nil {
		return err
	}
	if p.visited[realDir] {
		return nil // krusty reports real cycles itself
	}
	p.visited[realDir] = true

	var kfile string
	var content []byte
	// Like krusty, resolve references against the directory's real
	// (symlink-free) location.
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		rel := path.Join(realDir, name)
		data, err := p.fs.readRel(rel)
		if err == nil {
			kfile, content = rel, data
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if kfile == "" && generate {
		if err := generateKustomization(p.fs, realDir); err != nil {
			return err
		}
		kfile = path.Join(realDir, konfig.DefaultKustomizationFileName())
		content = p.fs.overlay[kfile]
	}
	if kfile == "" {
		return errFile(realDir, ErrKustomize, "no kustomization.yaml in the directory")
	}
	var k types.Kustomization
	if err := k.Unmarshal(content); err != nil {
		return errFile(kfile, ErrKustomize, err.Error())
	}
	k.FixKustomization() // folds deprecated fields (bases, env, …) into current ones
	if len(k.OpenAPI) > 0 {
		p.setsSchema = true
	}

	if len(k.HelmCharts) > 0 || k.HelmGlobals != nil {
		return errFile(kfile, ErrPluginsDisabled, "helmCharts inflates charts with the helm binary; use a helm application source instead")
	}
	// Only the unit's own kustomization (which the hub writes) lists
	// sources; a kustomization in the repo that lists a directory without
	// one fails as it does in kustomize and in Flux.
	sources := realDir == p.root && !pluginConfigs
	for _, e := range k.Resources {
		if err := p.entry(kfile, "resources", e, pluginConfigs, sources); err != nil {
			return err
		}
	}
	for _, e := range k.Components {
		if err := p.entry(kfile, "components", e, pluginConfigs, false); err != nil {
			return err
		}
	}
	for _, field := range []struct {
		name    string
		entries []string
	}{
		{"generators", k.Generators},
		{"transformers", k.Transformers},
		{"validators", k.Validators},
	} {
		for _, e := range field.entries {
			if err := p.pluginEntry(kfile, field.name, e); err != nil {
				return err
			}
		}
	}

	// Every other field that names a file: krusty loads these with an HTTP
	// GET when they are URLs, so they are checked the same way.
	var refs []struct{ field, value string }
	add := func(field string, values ...string) {
		for _, v := range values {
			if v != "" {
				refs = append(refs, struct{ field, value string }{field, v})
			}
		}
	}
	add("crds", k.Crds...)
	add("configurations", k.Configurations...)
	add("openapi.path", k.OpenAPI["path"])
	for _, r := range k.Replacements {
		add("replacements.path", r.Path)
	}
	for _, pt := range k.Patches {
		add("patches.path", pt.Path)
	}
	//lint:ignore SA1019 kustomizations in the wild still use it; its paths must be checked too
	for _, pt := range k.PatchesJson6902 {
		add("patchesJson6902.path", pt.Path)
	}
	//lint:ignore SA1019 kustomizations in the wild still use it; its paths must be checked too
	for _, pt := range k.PatchesStrategicMerge {
		if s := string(pt); !strings.ContainsAny(s, "\n{") {
			add("patchesStrategicMerge", s) // else an inline patch
		}
	}
	for _, g := range k.ConfigMapGenerator {
		add("configMapGenerator.files", fileSourcePaths(g.FileSources)...)
		add("configMapGenerator.envs", g.EnvSources...)
	}
	for _, g := range k.SecretGenerator {
		add("secretGenerator.files", fileSourcePaths(g.FileSources)...)
		add("secretGenerator.envs", g.EnvSources...)
	}
	for _, r := range refs {
		if _, err := p.local(kfile, r.field, r.value); err != nil {
			return err
		}
	}
	return nil
}

// fileSourcePaths strips the optional "key=" of configMapGenerator files.
func fileSourcePaths(sources []string) []string {
	out := make([]string, 0, len(sources))
	for _, s := range sources {
		if i := strings.IndexByte(s, '='); i >= 0 {
			s = s[i+1:]
		}
		out = append(out, s)
	}
	return out
}

// local checks that a reference of kfile is a local path inside the repo
// and returns it repo-relative.
func (p *preflight) local(kfile, field, value string) (string, error) {
	if looksRemote(value) {
		return "", errFile(kfile, ErrRemoteBase, fmt.Sprintf("%s entry %q is a URL", field, value))
	}
	if path.IsAbs(value) {
		return "", errFile(kfile, ErrPathEscape, fmt.Sprintf("%s entry %q is an absolute path", field, value))
	}
	rel := path.Join(path.Dir(kfile), value)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", errFile(kfile, ErrPathEscape, fmt.Sprintf("%s entry %q resolves outside the repository", field, value))
	}
	return rel, nil
}

// entry follows a resources/components entry: a directory is another
// kustomization (generated if generate and it has none), a file is
// remembered for diagnosis.
func (p *preflight) entry(kfile, field, value string, pluginConfigs, generate bool) error {
	rel, err := p.local(kfile, field, value)
	if err != nil {
		return err
	}
	_, fi, err := p.fs.statRel(rel)
	if err != nil {
		if isViolation(err) {
			return p.fs.note(err)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return errFile(kfile, ErrKustomize, fmt.Sprintf("%s entry %q does not exist", field, value))
		}
		return errFileCause(kfile, ErrKustomize, fmt.Sprintf("%s entry %q: %v", field, value, err), err)
	}
	if fi.IsDir() {
		return p.kustomization(rel, pluginConfigs, generate)
	}
	if pluginConfigs {
		data, err := p.fs.readRel(rel)
		if err != nil {
			return err
		}
		return checkPluginConfigs(rel, data)
	}
	if !p.seen[rel] {
		p.seen[rel] = true
		p.resources = append(p.resources, rel)
	}
	return nil
}

// pluginEntry checks one generators/transformers/validators entry: inline
// configuration, a file of configurations or a kustomization producing them.
func (p *preflight) pluginEntry(kfile, field, value string) error {
	if isInlineConfig(value) {
		return checkPluginConfigs(kfile, []byte(value))
	}
	return p.entry(kfile, field, value, true, false)
}

// isInlineConfig mirrors krusty: an entry that parses as an object is an
// inline plugin configuration, anything else is a path.
func isInlineConfig(s string) bool {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		return false
	}
	_, ok := m["kind"]
	return ok
}

// checkPluginConfigs accepts only kustomize's builtin plugins (apiVersion
// "builtin"), minus the Helm inflator: with plugins disabled krusty would
// refuse the others too, but here the error names the file.
func checkPluginConfigs(file string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 1; ; i++ {
		var obj struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
		}
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return nil // krusty reports malformed YAML
		}
		if obj.Kind == "" && obj.APIVersion == "" {
			continue
		}
		if obj.APIVersion != konfig.BuiltinPluginApiVersion {
			return errFile(file, ErrPluginsDisabled, fmt.Sprintf("plugin %d (%s %s) is not a builtin; exec, Go and function plugins are disabled", i, obj.APIVersion, obj.Kind))
		}
		if obj.Kind == "HelmChartInflationGenerator" {
			return errFile(file, ErrPluginsDisabled, "HelmChartInflationGenerator runs the helm binary; use a helm application source instead")
		}
	}
}

var scpUserRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// looksRemote is true for everything krusty would treat as a git or HTTP
// location (and a little more): any scheme, scp-style user@host:path and
// github.com shorthands, with or without the forced "git::" prefix.
func looksRemote(s string) bool {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimPrefix(t, "git::")
	return strings.Contains(t, "://") ||
		scpUserRe.MatchString(t) ||
		strings.HasPrefix(t, "github.com/") || strings.HasPrefix(t, "github.com:")
}

// krustyOptions: no reordering (render sorts itself), references anywhere in
// the repo (confinedFS confines them), builtin plugins only, no Helm.
func krustyOptions() *krusty.Options {
	return &krusty.Options{
		Reorder:          krusty.ReorderOptionNone,
		LoadRestrictions: types.LoadRestrictionsNone,
		PluginConfig:     types.DisabledPluginConfig(),
	}
}

// build runs preflight and krusty on the unit directory dir, then use on
// krusty's output. All three run inside kustomizeSchema's gate, since
// kustomize's resources read its process-wide schema as well (a kind's
// scope, for one), and in a goroutine the caller stops waiting for at
// ctx's end: krusty stops at its next read, which fails once ctx is done,
// and only then leaves the gate.
func build(ctx context.Context, f *confinedFS, dir string, use func(resmap.ResMap) error) error {
	done := make(chan error, 1)
	go func() { done <- newPreflight(f).build(ctx, dir, use) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return timeoutError(ctx.Err())
	}
}

func (p *preflight) build(ctx context.Context, dir string, use func(resmap.ResMap) error) error {
	f := p.fs
	// The preflight parses files with kustomize too: it enters as a build
	// that sets no schema, and changes its turn for one that runs alone
	// when a kustomization turns out to set one.
	release, err := kustomizeSchema.enter(ctx, false)
	if err != nil {
		return timeoutError(err)
	}
	defer func() { release() }()
	root, err := f.resolve(dir)
	if err != nil {
		return err
	}
	p.root = root
	if err := p.kustomization(dir, false, false); err != nil {
		if v := f.Violation(); v != nil {
			return v
		}
		return err
	}
	if p.setsSchema {
		release()
		if release, err = kustomizeSchema.enter(ctx, true); err != nil {
			release = func() {}
			return timeoutError(err)
		}
	}
	m, err := krusty.MakeKustomizer(krustyOptions()).Run(f, f.abs(root))
	if v := f.Violation(); v != nil {
		return v
	}
	if err != nil {
		if types.IsErrOnlyBuiltinPluginsAllowed(err) {
			return classed(ErrPluginsDisabled, f.relativize(err.Error()))
		}
		if derr := diagnose(f, p.resources); derr != nil {
			return derr
		}
		return classed(ErrKustomize, f.relativize(err.Error()))
	}
	if err := use(m); err != nil {
		if errors.Is(err, ErrInvalidObject) {
			// Name the source file when the object can be found there.
			if derr := diagnose(f, p.resources); derr != nil {
				return derr
			}
		}
		return err
	}
	return nil
}

// relativize strips the repository's absolute path from a message.
func (f *confinedFS) relativize(msg string) string {
	msg = strings.ReplaceAll(msg, f.rootAbs+"/", "")
	return strings.ReplaceAll(msg, f.rootAbs, ".")
}
