package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-gitops/flotilla/pkg/slice"
	"github.com/flotilla-gitops/flotilla/pkg/status"
)

// Result is a rendered unit.
type Result struct {
	// Objects in apply order: kinds others depend on first (Namespace,
	// CRDs, RBAC, ConfigMaps/Secrets, Services, workloads), admission
	// webhooks last, other kinds alphabetically between; ties by group,
	// kind, namespace, name. The order depends on the objects only, never
	// on how the sources list them.
	Objects []*unstructured.Unstructured
	// Hooks are a helm unit's Helm hooks (objects annotated helm.sh/hook),
	// not among Objects: the agent runs them around the unit's apply, in
	// this order (Helm's: weight, then name, then kind). Always empty for other
	// kinds of unit.
	Hooks []Hook
	// Size is the total size of Objects and Hooks as JSON (krusty's
	// encoding), the figure Limits.MaxTotalSize bounds.
	Size int64
	// Encrypted are the SOPS documents the unit read (repo-relative,
	// sorted): decrypted with Options.Decryptor, else redacted.
	Encrypted []string
	// UnknownScope are the kinds ("Kind.group") of the unit's objects whose
	// scope neither the cluster (Capabilities.Namespaced), nor the unit's
	// CRDs, nor the built-in kinds tell: they are treated as namespaced.
	UnknownScope []string
}

// YAML encodes the objects, then the hooks, as one multi-document YAML
// stream (keys sorted), the form used by golden files and plan diffs.
func (r *Result) YAML() ([]byte, error) {
	var b bytes.Buffer
	all := r.Objects
	if len(r.Hooks) > 0 {
		all = slices.Clone(r.Objects)
		for _, h := range r.Hooks {
			all = append(all, h.Object)
		}
	}
	for i, o := range all {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

// Unit renders one unit of a slice from the repository checked out at
// repoRoot. kustomize, manifests and volcano units are built by krusty from
// the unit directory u.Path; helm units template u.Helm.Chart with
// u.Helm.Values, and the output is then built by krusty with the unit
// directory's kustomization.yaml (which lists slice.HelmOutputFile), or
// with a generated one when the directory has none; u.Namespace, the
// release namespace, then fills the namespaced objects that have none.
// Every object ends with the namespace the cluster holds it in (none for a
// cluster-scoped kind; see Capabilities.Namespaced).
//
// The error is a *Error classified by the Err* sentinels (errors.Is).
func Unit(ctx context.Context, repoRoot string, u slice.Unit, opts Options) (*Result, error) {
	lim := opts.Limits.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	res, err := renderUnit(ctx, repoRoot, u, opts, lim)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, ErrTimeout) {
			// Whatever failed, it failed because time ran out.
			err = timeoutError(cerr)
		}
		return nil, failureOf(unitError(u.Name, err))
	}
	return res, nil
}

// failureOf gives a render error its condition reason: a missing age key
// can be fixed in the cluster (its Secret is read at every render), so a
// decryption failure is retried; anything else waits for Git.
func failureOf(err error) error {
	if errors.Is(err, ErrDecrypt) {
		return status.Retrying(status.ReasonDecryptionFailed, err)
	}
	return status.Stalling(status.ReasonRenderFailed, err)
}

func renderUnit(ctx context.Context, repoRoot string, u slice.Unit, opts Options, lim Limits) (*Result, error) {
	unitDir, err := checkRel(u.Path)
	if err != nil {
		return nil, err
	}
	f, err := openConfined(ctx, repoRoot, lim.MaxFileSize)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	f.decryptor = opts.Decryptor

	if _, fi, err := f.statRel(unitDir); err != nil || !fi.IsDir() {
		if err != nil && isViolation(err) {
			return nil, err
		}
		return nil, errFile(unitDir, ErrKustomize, "unit directory does not exist")
	}

	switch u.Kind {
	case slice.UnitKustomize, slice.UnitManifests, slice.UnitVolcano:
	case slice.UnitHelm:
		if err := prepareHelm(ctx, f, unitDir, u, opts, lim); err != nil {
			return nil, ensureClass(err, ErrHelm)
		}
	default:
		return nil, errFile(unitDir, ErrKustomize, fmt.Sprintf("unknown unit kind %q", u.Kind))
	}

	// A helm unit's release namespace fills only namespaced objects that
	// have none (helm install); other units had kustomize's namespace:.
	ns, fill := u.Namespace, u.Kind == slice.UnitHelm
	if fill {
		ns = releaseNamespace(u)
	}
	var (
		objs    []*unstructured.Unstructured
		size    int64
		unknown []string
	)
	err = build(ctx, f, unitDir, func(m resmap.ResMap) error {
		var err error
		if unknown, err = placeNamespaces(m, newScopes(opts.Capabilities, m), ns, fill); err != nil {
			return err
		}
		objs, size, err = toObjects(m, lim)
		return err
	})
	if err != nil {
		return nil, ensureClass(err, ErrKustomize)
	}
	res := &Result{Objects: objs, Size: size, Encrypted: f.encryptedFiles(), UnknownScope: unknown}
	if opts.Decryptor == nil && len(res.Encrypted) > 0 && markClusterHashes(objs) {
		sortObjects(objs) // names changed
	}
	if u.Kind == slice.UnitHelm {
		if res.Objects, res.Hooks, err = splitHooks(objs); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// prepareHelm templates the unit's chart and puts the output (and, if the
// unit has no kustomization, a generated one) into f's overlay.
func prepareHelm(ctx context.Context, f *confinedFS, unitDir string, u slice.Unit, opts Options, lim Limits) error {
	if u.Helm == nil {
		return errFile(unitDir, ErrHelm, "helm unit without helm release")
	}
	chartRel, err := checkRel(u.Helm.Chart)
	if err != nil {
		return err
	}
	req := &helmRequest{
		ReleaseName: u.Helm.ReleaseName,
		Namespace:   releaseNamespace(u),
		KubeVersion: opts.Capabilities.KubeVersion,
		APIVersions: opts.Capabilities.APIVersions,
		MaxOutput:   lim.MaxTotalSize,
	}
	if req.ReleaseName == "" {
		req.ReleaseName = u.Name
	}
	if err := loadChart(f, chartRel, lim, req); err != nil {
		return err
	}
	if u.Helm.Values != "" {
		valuesRel, err := checkRel(u.Helm.Values)
		if err != nil {
			return err
		}
		if req.Values, err = f.readRel(valuesRel); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return errFile(valuesRel, ErrHelm, "values file does not exist")
			}
			return err
		}
	}
	manifest, err := runHelm(ctx, req, lim, opts.HelmInProcess)
	if err != nil {
		if errors.Is(err, ErrTimeout) {
			return &fileError{file: chartRel, err: err}
		}
		var fe *fileError
		if !errors.As(err, &fe) {
			return &fileError{file: chartRel, err: err}
		}
		return err
	}
	outRel := path.Join(unitDir, slice.HelmOutputFile)
	f.overlay[outRel] = manifest
	if err := ScanYAML(manifest); err != nil {
		return &fileError{file: outRel, err: err}
	}
	if !hasKustomization(f, unitDir) {
		k := map[string]any{
			"apiVersion": "kustomize.config.k8s.io/v1beta1",
			"kind":       "Kustomization",
			"resources":  []string{slice.HelmOutputFile},
		}
		data, err := yaml.Marshal(k)
		if err != nil {
			return err
		}
		f.overlay[path.Join(unitDir, konfig.DefaultKustomizationFileName())] = data
	}
	return nil
}

// releaseNamespace is a helm unit's .Release.Namespace.
func releaseNamespace(u slice.Unit) string {
	if u.Namespace == "" {
		return "default"
	}
	return u.Namespace
}

func hasKustomization(f *confinedFS, dir string) bool {
	for _, name := range konfig.RecognizedKustomizationFileNames() {
		if _, _, err := f.statRel(path.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
