package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// input is one document file Load reads.
type input struct {
	rel  string // slash-separated, relative to the root
	kind string // the kind its place in the tree requires
	name string // the metadata.name its file (or app directory) name requires
	// problem is set for a file that cannot be read as an input (a
	// symlink), reported instead of decoding.
	problem string
}

// loaded is one decoded document.
type loaded struct {
	in      input
	doc     *document
	obj     any  // *Cluster, *Fleet, *Application or *GlobalJob; nil if unusable
	decoded bool // the typed decode succeeded (unknown fields aside)
}

// Load reads and validates the fleet repo at root: clusters/**/*.yaml,
// fleets/**/*.yaml, apps/<name>/app.yaml, jobs/**/*.yaml, routes/**/*.yaml
// policies/**/*.yaml, notifications/providers/**/*.yaml and
// notifications/alerts/**/*.yaml (.yml too).
// Other files, and rendered/ and charts/, are not inputs.
//
// Problems in the inputs are returned together as an ErrorList, sorted by
// file and line. The Repo is returned even then, holding what could be
// loaded and the Warnings, so a caller can show both; it must not be
// compiled. Other errors (the root is unreadable, ctx is done) are returned
// wrapped, with a nil Repo.
func Load(ctx context.Context, root string) (*Repo, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("load fleet repo: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("load fleet repo: %s is not a directory", root)
	}
	inputs, err := findInputs(root)
	if err != nil {
		return nil, fmt.Errorf("load fleet repo: %w", err)
	}
	results, err := decodeAll(ctx, root, inputs)
	if err != nil {
		return nil, fmt.Errorf("load fleet repo: %w", err)
	}
	r := &Repo{Root: root}
	v := newValidator(r, results)
	v.run()
	if len(v.errs) > 0 {
		return r, v.errs
	}
	return r, nil
}

// findInputs lists the input files in a stable order.
func findInputs(root string) ([]input, error) {
	var inputs []input
	for _, dir := range []struct{ dir, kind string }{
		{ClustersDir, KindCluster}, {FleetsDir, KindFleet}, {JobsDir, KindGlobalJob},
		{RoutesDir, KindTrafficRoute}, {PoliciesDir, KindFleetPolicy},
		{ProvidersDir, KindProvider}, {AlertsDir, KindAlert},
	} {
		base := filepath.Join(root, dir.dir)
		err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == base {
					return fs.SkipDir
				}
				return err
			}
			if strings.HasPrefix(e.Name(), ".") && p != base {
				if e.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			ext := path.Ext(e.Name())
			if e.IsDir() || (ext != ".yaml" && ext != ".yml") {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			in := input{rel: filepath.ToSlash(rel), kind: dir.kind, name: strings.TrimSuffix(e.Name(), ext)}
			if !e.Type().IsRegular() {
				in.problem = "not a regular file (symlinks are not followed)"
			}
			inputs = append(inputs, in)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, AppsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		rel := path.Join(AppsDir, e.Name(), AppFile)
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // a directory of shared sources, not an application
		}
		if err != nil {
			return nil, err
		}
		in := input{rel: rel, kind: KindApplication, name: e.Name()}
		if !fi.Mode().IsRegular() {
			in.problem = "not a regular file (symlinks are not followed)"
		}
		inputs = append(inputs, in)
	}
	sort.Slice(inputs, func(i, j int) bool { return inputs[i].rel < inputs[j].rel })
	return inputs, nil
}

// decodeAll reads and decodes the inputs on every CPU; results keep the
// inputs' order.
func decodeAll(ctx context.Context, root string, inputs []input) ([]*loaded, error) {
	results := make([]*loaded, len(inputs))
	workers := runtime.GOMAXPROCS(0)
	if workers > len(inputs) {
		workers = len(inputs)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := loadFile(root, inputs[i])
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				results[i] = res
			}
		}()
	}
	var ctxErr error
	for i := range inputs {
		if ctxErr = ctx.Err(); ctxErr != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if ctxErr != nil {
		return nil, ctxErr
	}
	return results, firstErr
}

func loadFile(root string, in input) (*loaded, error) {
	res := &loaded{in: in, doc: &document{file: in.rel}}
	if in.problem != "" {
		res.doc.add(0, "", ErrInvalidValue, "%s", in.problem)
		return res, nil
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(in.rel)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", in.rel, err)
	}
	res.doc, res.obj, res.decoded = decodeDocument(in.rel, data, in.kind, in.name)
	return res, nil
}

// decodeDocument parses one input document of the expected kind and name.
// obj is nil when the header is wrong or the document does not parse;
// decoded is false when the typed decode failed (obj is then partial).
func decodeDocument(file string, data []byte, kind, name string) (d *document, obj any, decoded bool) {
	d = parseDocument(file, data)
	if d.root == nil {
		return d, nil, false
	}
	apiVersion, gotKind := d.header()
	headerOK := true
	switch {
	case !d.has("apiVersion"):
		d.errorf("apiVersion", ErrRequired, "must be %s", APIVersion)
		headerOK = false
	case apiVersion != APIVersion:
		d.errorf("apiVersion", ErrInvalidValue, "%q is not %s", apiVersion, APIVersion)
		headerOK = false
	}
	switch {
	case !d.has("kind"):
		d.errorf("kind", ErrRequired, "must be %s here", kind)
		headerOK = false
	case gotKind != kind:
		d.errorf("kind", ErrInvalidValue, "a file in %s/ must be %s, not %q", strings.SplitN(file, "/", 2)[0], withArticle(kind), gotKind)
		headerOK = false
	}
	if !headerOK {
		return d, nil, false
	}
	var meta *ObjectMeta
	var src *Source
	switch kind {
	case KindCluster:
		c := &Cluster{}
		obj, meta, src = c, &c.Metadata, &c.Source
	case KindFleet:
		f := &Fleet{}
		obj, meta, src = f, &f.Metadata, &f.Source
	case KindApplication:
		a := &Application{}
		obj, meta, src = a, &a.Metadata, &a.Source
	case KindGlobalJob:
		j := &GlobalJob{}
		obj, meta, src = j, &j.Metadata, &j.Source
	case KindTrafficRoute:
		r := &TrafficRoute{}
		obj, meta, src = r, &r.Metadata, &r.Source
	case KindFleetPolicy:
		p := &FleetPolicy{}
		obj, meta, src = p, &p.Metadata, &p.Source
	case KindProvider:
		p := &Provider{}
		obj, meta, src = p, &p.Metadata, &p.Source
	case KindAlert:
		a := &Alert{}
		obj, meta, src = a, &a.Metadata, &a.Source
	default:
		return d, nil, false
	}
	ok := d.decodeStrict(d.root, "", obj)
	d.decodeErrs = len(d.errs)
	if !ok {
		return d, nil, false
	}
	decoded = onlyUnknownFields(d.errs)
	*src = Source{File: file, Line: d.root.Line}
	recordLines(d, obj)
	if hasErrorUnder(d.errs, "metadata") {
		return d, obj, decoded
	}
	switch {
	case !d.has("metadata.name") || meta.Name == "":
		d.errorf("metadata.name", ErrRequired, "must be %q, the %s name", name, nameSource(kind))
		decoded = false
	case meta.Name != name:
		d.errorf("metadata.name", ErrInvalidValue, "%q must match the %s name %q", meta.Name, nameSource(kind), name)
		decoded = false
	}
	return d, obj, decoded
}

func nameSource(kind string) string {
	if kind == KindApplication {
		return "directory"
	}
	return "file"
}

// hasErrorUnder reports whether a problem was found at or under field.
func hasErrorUnder(errs []*FieldError, field string) bool {
	for _, e := range errs {
		if isUnder(e.Field, field) {
			return true
		}
	}
	return false
}

// onlyUnknownFields reports whether every problem so far is an unknown
// field, after which the typed value is still complete.
func onlyUnknownFields(errs []*FieldError) bool {
	for _, e := range errs {
		if !errors.Is(e, ErrUnknownField) {
			return false
		}
	}
	return true
}
