package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/ignore"
	"helm.sh/helm/v3/pkg/release"
)

// maxChartFiles bounds the files of one chart directory.
const maxChartFiles = 10000

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// helmFile is one chart file, named relative to the chart directory.
type helmFile struct {
	Name string
	Data []byte
}

// helmRequest is everything Helm needs to template one release; it crosses
// the process boundary to a worker (gob), so the worker touches no files.
type helmRequest struct {
	Files       []helmFile // a chart directory, or
	Archive     []byte     // a packaged chart (.tgz)
	Values      []byte
	ReleaseName string
	Namespace   string
	KubeVersion string
	APIVersions []string
	MaxOutput   int64
}

// helmResponse is the worker's answer: the manifest, or an error class
// (one of the helmClass* names) and its detail.
type helmResponse struct {
	Manifest []byte
	Class    string
	Detail   string
}

const (
	helmClassHelm     = "helm"
	helmClassTooLarge = "too-large"
)

// loadChart reads a chart for a request through the confined filesystem: a
// directory (honouring .helmignore, as helm does) or a .tgz file. Symlinks
// are followed only inside the repository (ErrSymlinkEscape); a directory
// linked twice is read under both paths, as Helm's loader reads it, and a
// link back to a directory being walked is refused (ErrHelm naming it).
// Every file is size-limited and YAML-bomb-checked, and the chart as a
// whole is bounded by MaxTotalSize and maxChartFiles files and directories.
func loadChart(f *confinedFS, chartRel string, lim Limits, req *helmRequest) error {
	_, fi, err := f.statRel(chartRel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errFile(chartRel, ErrHelm, "chart not found")
		}
		return f.note(err)
	}
	if !fi.IsDir() {
		data, err := f.readRel(chartRel)
		if err != nil {
			return err
		}
		req.Archive = data
		return nil
	}
	rules := ignore.Empty()
	if data, err := f.readRel(path.Join(chartRel, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return errFile(path.Join(chartRel, ignore.HelmIgnore), ErrHelm, err.Error())
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	rules.AddDefaults()

	var total int64
	var dirs int
	// Helm's loader follows directory links wherever they lead, so a
	// directory reached by two paths is read under both names (the Volcano
	// chart's jobflow/crd/v1 -> bases). Only a directory that is its own
	// ancestor would never end: walking is the real paths of the
	// directories on the current walk path.
	type step struct{ rel, real string }
	var walking []step
	var walk func(dir string) error
	walk = func(dir string) error {
		if err := f.ctxErr(); err != nil {
			return err
		}
		real, err := f.resolve(dir)
		if err != nil {
			return f.note(err)
		}
		for _, a := range walking {
			if a.real == real {
				return errFile(dir, ErrHelm, "directory symlink loop: leads back to "+a.rel)
			}
		}
		// Links can multiply directories without adding files; bound them
		// as files are bounded.
		if dirs++; dirs > maxChartFiles {
			return errFile(chartRel, ErrTooLarge, fmt.Sprintf("chart has more than %d directories", maxChartFiles))
		}
		walking = append(walking, step{dir, real})
		defer func() { walking = walking[:len(walking)-1] }()
		names, err := f.readDirRel(dir)
		if err != nil {
			return err
		}
		for _, n := range names {
			rel := path.Join(dir, n)
			name := strings.TrimPrefix(rel, chartRel+"/")
			_, fi, err := f.statRel(rel)
			if err != nil {
				return f.note(err)
			}
			if rules.Ignore(name, fi) {
				continue
			}
			if fi.IsDir() {
				if err := walk(rel); err != nil {
					return err
				}
				continue
			}
			if !fi.Mode().IsRegular() {
				return errFile(rel, ErrHelm, "not a regular file")
			}
			if len(req.Files) >= maxChartFiles {
				return errFile(chartRel, ErrTooLarge, fmt.Sprintf("chart has more than %d files", maxChartFiles))
			}
			data, err := f.readRel(rel)
			if err != nil {
				return err
			}
			total += int64(len(data))
			if total > lim.MaxTotalSize {
				return errFile(chartRel, ErrTooLarge, fmt.Sprintf("chart files exceed %d bytes", lim.MaxTotalSize))
			}
			req.Files = append(req.Files, helmFile{Name: name, Data: bytes.TrimPrefix(data, utf8BOM)})
		}
		return nil
	}
	return walk(chartRel)
}

// runHelm templates req in a worker process when this binary can serve one
// (see ServeWorkerIfRequested), in a goroutine otherwise.
func runHelm(ctx context.Context, req *helmRequest, lim Limits, inProcess bool) ([]byte, error) {
	if !inProcess && workerCapable.Load() {
		return workers.run(ctx, req, lim)
	}
	done := make(chan helmResponse, 1)
	go func() { done <- safeHelmTemplate(req) }()
	select {
	case resp := <-done:
		return responseResult(resp)
	case <-ctx.Done():
		// Go templates cannot be interrupted: the goroutine runs on until
		// the template ends. Only a worker process can be stopped.
		return nil, timeoutError(ctx.Err())
	}
}

func responseResult(resp helmResponse) ([]byte, error) {
	switch resp.Class {
	case "":
		return resp.Manifest, nil
	case helmClassTooLarge:
		return nil, classed(ErrTooLarge, resp.Detail)
	default:
		return nil, &classError{class: ErrHelm, detail: sanitizeJoined(resp.Detail)}
	}
}

// safeHelmTemplate is helmTemplate that turns a Helm panic into an error.
func safeHelmTemplate(req *helmRequest) (resp helmResponse) {
	defer func() {
		if r := recover(); r != nil {
			resp = helmResponse{Class: helmClassHelm, Detail: fmt.Sprintf("panic: %v", r)}
		}
	}()
	manifest, err := helmTemplate(req)
	if err != nil {
		class := helmClassHelm
		if errors.Is(err, ErrTooLarge) {
			class = helmClassTooLarge
		}
		return helmResponse{Class: class, Detail: err.Error()}
	}
	return helmResponse{Manifest: manifest}
}

// helmTemplate does what `helm template --include-crds --skip-tests` does: a client-only
// dry-run install with the given capabilities. CRDs from crds/ come first,
// then the manifests in Helm's install order, then hooks other than test
// hooks, which keep their helm.sh/hook annotations: they go through the
// unit's kustomization like the rest, and Unit then sets them apart
// (splitHooks) for the agent to run in Helm's phases. Each document keeps
// Helm's "# Source:" comment, which error messages use.
func helmTemplate(req *helmRequest) ([]byte, error) {
	var ch *chart.Chart
	var err error
	if req.Archive != nil {
		ch, err = loader.LoadArchive(bytes.NewReader(req.Archive))
	} else {
		files := make([]*loader.BufferedFile, len(req.Files))
		for i, f := range req.Files {
			files[i] = &loader.BufferedFile{Name: f.Name, Data: f.Data}
		}
		ch, err = loader.LoadFiles(files)
	}
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	if deps := ch.Metadata.Dependencies; len(deps) > 0 {
		if err := checkDependencies(ch, deps); err != nil {
			return nil, fmt.Errorf("chart dependencies: %w", err)
		}
	}
	vals, err := chartutil.ReadValues(req.Values)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	manifest, hooks, err := templateClientOnly(ch, vals, req)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Write(manifest)
	for _, h := range hooks {
		if slices.Contains(h.Events, release.HookTest) {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	if int64(out.Len()) > req.MaxOutput {
		return nil, classed(ErrTooLarge, fmt.Sprintf("helm output is %d bytes, the limit is %d", out.Len(), req.MaxOutput))
	}
	return out.Bytes(), nil
}

// sanitizeJoined is sanitize for Helm messages, whose later lines (schema
// violations, the template call chain) carry the useful part.
func sanitizeJoined(msg string) string {
	lines := strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return sanitize(strings.Join(lines, "; "))
}
